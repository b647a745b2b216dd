package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"

	"orderd/publish"
)

func tailCommand() command {
	return command{
		Name:    "tail",
		Summary: "print order events from NATS as they arrive",
		Help: "Prints one line per event: the subject, a space, the CloudEvent JSON (with its traceparent\n" +
			"attribute when orderd traces: the trace of the webhook or job that caused it). With -server it reads no\n" +
			"config file, not even one named by -config: give -stream if the stream is not ORDERD.\n" +
			"Otherwise it reads nats.url (or the embedded server's nats.embedded.listen), nats.stream and\n" +
			"the credentials from the config.",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			subject := fs.String("subject", "", "subject filter `S`, wildcards allowed (default: every subject of the stream)")
			server := fs.String("server", "", "NATS `URL` to read from; the config file is then not read")
			stream := fs.String("stream", "", "stream `NAME` (default nats.stream, ORDERD)")
			all := fs.Bool("all", false, "start with the oldest event the stream holds, not the next new one")
			return func(ctx context.Context, e *env) error {
				if err := noArgs(e); err != nil {
					return err
				}
				cc := publish.ConnConfig{URL: *server, Name: "orderd-tail", Logger: slog.New(slog.DiscardHandler)}
				name := *stream
				from := "" // where the URL came from, for the error
				if *server == "" {
					cfg, err := e.LoadConfigFor(configUse{NATS: true})
					if err != nil {
						return err
					}
					cc.URL, from = cfg.NATS.URL, " (nats.url)"
					if cc.URL == "" {
						if _, port, err := net.SplitHostPort(cfg.NATS.Embedded.Listen); err == nil && port == "0" {
							return cfg.errorf("nats.embedded.listen", "port 0 is chosen anew at each start: "+
								"give -server with the NATS address of orderd's \"orderd started\" log line")
						}
						cc.URL = "nats://" + cfg.NATS.Embedded.Listen
						from = " (nats.embedded.listen: is orderd running?)"
					}
					cc.CredentialsFile = cfg.NATS.CredentialsFile
					cc.Token = cfg.NATS.Token.Reveal()
					cc.TLS = publish.TLSConfig{CAFile: cfg.NATS.TLS.CAFile, CertFile: cfg.NATS.TLS.CertFile, KeyFile: cfg.NATS.TLS.KeyFile}
					if name == "" {
						name = cfg.NATS.Stream
					}
				}
				if name == "" {
					name = "ORDERD"
				}
				// Events go to standard output; what happens to the
				// connection goes to standard error, so that a person
				// watching knows why events stopped, and when they resume.
				var closing atomic.Bool // a close of ours is no news
				cc.OnDown = func(err error) {
					if closing.Load() {
						return
					}
					why := ""
					if err != nil {
						why = " (" + err.Error() + ")"
					}
					fmt.Fprintf(e.Stderr, "orderd tail: lost the connection to NATS%s; reconnecting, events resume when it is back\n", why)
				}
				cc.OnUp = func(url string) {
					if closing.Load() {
						return
					}
					fmt.Fprintf(e.Stderr, "orderd tail: reconnected to NATS at %s\n", url)
				}
				nc, err := publish.Connect(ctx, cc)
				if err != nil {
					return err
				}
				defer func() {
					closing.Store(true)
					nc.Close()
				}()
				// Connect keeps retrying in the background, as the daemon
				// wants; a reader wants to hear at once that nobody is
				// there, rather than a client error from its first request.
				if !nc.IsConnected() {
					return fmt.Errorf("cannot reach NATS at %s%s", redactURL(cc.URL), from)
				}
				js, err := publish.NewJetStream(nc, 0)
				if err != nil {
					return err
				}
				var opts []publish.TailOption
				if *all {
					opts = append(opts, publish.TailAll())
				}
				err = publish.Tail(ctx, js, name, *subject, e.Stdout, opts...)
				if errors.Is(err, publish.ErrTailSubject) {
					return e.usagef("-subject: %v", err)
				}
				return err
			}
		},
	}
}
