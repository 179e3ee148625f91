From:From:To:Subject
