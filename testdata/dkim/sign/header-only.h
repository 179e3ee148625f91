From:From:Subject
