From:From:To:Cc:Subject:Date:Message-ID:In-Reply-To:References:MIME-Version:Content-Type:X-Envelopay-Type
