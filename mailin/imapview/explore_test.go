package imapview_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/mailin/relaytest"
)

func TestExploreNames(t *testing.T) {
	relay := relaytest.Start(t)
	bob := relay.Mailbox("bob@agents.test")
	alice := relay.Mailbox("alice@agents.test")
	alice.SendType("which", `{"note":"first"}`, bob.Address)
	bob.Next()
	c, _ := net.Dial("tcp", relay.IMAPAddr)
	r := bufio.NewReader(c)
	r.ReadString('\n')
	send := func(line string) {
		fmt.Fprintf(c, "%s\r\n", line)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Logf("%s -> err %v", line, err)
				return
			}
			if strings.HasPrefix(l, "A ") {
				t.Logf("%q -> %q", line, l)
				return
			}
		}
	}
	send("A LOGIN " + bob.Address + " " + bob.Password)
	for _, n := range []string{`""`, `"/"`, `"a//b"`, `"../x"`, `"a*"`, `"%"`, `"` + strings.Repeat("x", 2000) + `"`, `"&Jjo"`, `"a/"`, `"/a"`, `" x"`, `"Nope"`, `"INBOX/sub"`} {
		for _, cmd := range []string{"SELECT", "EXAMINE", "STATUS %s (MESSAGES)", "DELETE", "CREATE", "RENAME %s foo", "RENAME INBOX %s"} {
			if !strings.Contains(cmd, "%s") {
				cmd += " %s"
			}
			send("A " + fmt.Sprintf(cmd, n))
		}
	}
	send("A SELECT INBOX")
	for _, n := range []string{`""`, `"/"`, `"Nope"`, `"a//b"`, `"&Jjo"`, `"a*"`} {
		send("A COPY 1:* " + n)
		send("A MOVE 1:* " + n)
	}
}
