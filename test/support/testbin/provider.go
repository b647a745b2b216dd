package testbin

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"time"
)

// ProviderReady reads the output of the fake provider (cmd/providertest)
// until it has printed its PROVIDER_URL= and PROVIDER_API_KEY= lines, and
// returns them. It goes on reading in the background until r ends, so
// the process never blocks on a full pipe; the caller closes r when the
// process exits. It fails when r ends first, or after timeout.
func ProviderReady(r io.Reader, timeout time.Duration) (url, key string, err error) {
	type ready struct{ url, key string }
	readyc := make(chan ready, 1)
	go func() {
		var got ready
		sent := false
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PROVIDER_URL="); ok {
				got.url = v
			}
			if v, ok := strings.CutPrefix(sc.Text(), "PROVIDER_API_KEY="); ok {
				got.key = v
			}
			if !sent && got.url != "" && got.key != "" {
				sent = true
				readyc <- got
			}
		}
		close(readyc)
	}()
	select {
	case got, ok := <-readyc:
		if !ok {
			return "", "", errors.New("providertest exited before it was ready")
		}
		return got.url, got.key, nil
	case <-time.After(timeout):
		return "", "", errors.New("providertest printed no PROVIDER_URL within " + timeout.String())
	}
}
