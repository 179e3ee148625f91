From:From:To:To:Subject
