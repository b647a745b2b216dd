//go:build chaos

package chaos_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The suite's names: every namespace it creates starts with nsPrefix, and
// the one link it adds to the namespace it runs in is hostLink. Nothing
// else on the machine is touched.
const (
	nsPrefix = "ochaos-"
	hostLink = "ochaos0"
	bridgeNS = nsPrefix + "br"
)

// subnet is the private /24 of the suite (its first three octets). It
// exists only on the suite's bridge and the suite's veth pairs.
func subnet() string {
	if s := os.Getenv("CHAOS_SUBNET"); s != "" {
		return s
	}
	return "10.99.0"
}

// host is one machine of the world: a network namespace with one
// interface, eth0, whose other end is port on the bridge.
type host struct {
	name string // n1, n2, n3, a, b, provider
	ns   string
	ip   string
	port string // the bridge-side veth, in bridgeNS
}

// lab is the suite's network: a bridge in its own namespace, one namespace
// per host, and the suite's own veth into the bridge.
type lab struct {
	hosts map[string]*host
	// netem is false when the kernel lacks the netem qdisc; loss and
	// delay then use iptables' statistic match and a slow htb class.
	netem bool

	mu    sync.Mutex
	flaps map[string]bool // bridge ports set down by a fault
}

// hostIPs are the hosts' last octets.
var hostIPs = map[string]int{"n1": 11, "n2": 12, "n3": 13, "a": 21, "b": 22, "provider": 30}

// sh runs a command and returns its combined output and an error that
// quotes it.
func sh(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// must runs a command and fails the test if it fails.
func must(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := sh(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// removeLeftovers deletes namespaces and the link of an earlier run of the
// suite that did not get to clean up (a go test killed or timed out), and
// kills, by PID, the processes that run still left in its namespaces: a
// namespace lives on as long as a process is in it.
func removeLeftovers() {
	out, _ := sh("ip", "netns", "list")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
			continue
		}
		pids, _ := sh("ip", "netns", "pids", f[0])
		for _, p := range strings.Fields(pids) {
			if pid, err := strconv.Atoi(p); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_, _ = sh("ip", "netns", "del", f[0])
	}
	_, _ = sh("ip", "link", "del", hostLink)
}

// newLab builds the network and registers its removal with t.Cleanup
// before the first piece exists, so a failure halfway leaves nothing.
func newLab(t *testing.T) *lab {
	t.Helper()
	for _, c := range []string{"ip", "iptables", "tc"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("the chaos suite needs %s on PATH (Debian: iproute2, iptables): %v", c, err)
		}
	}
	removeLeftovers()
	// The subnet must be the suite's alone: a route to it in the
	// namespace the suite runs in means someone else uses it.
	if out, _ := sh("ip", "-4", "route", "show", subnet()+".0/24"); strings.TrimSpace(out) != "" {
		t.Fatalf("%s.0/24 is already routed here (%s); set CHAOS_SUBNET to a free private /24 such as 10.98.7", subnet(), strings.TrimSpace(out))
	}
	l := &lab{hosts: map[string]*host{}, flaps: map[string]bool{}}
	t.Cleanup(func() {
		for _, h := range l.hosts {
			_, _ = sh("ip", "netns", "del", h.ns)
		}
		_, _ = sh("ip", "netns", "del", bridgeNS)
		_, _ = sh("ip", "link", "del", hostLink)
	})
	must(t, "ip", "netns", "add", bridgeNS)
	must(t, "ip", "-n", bridgeNS, "link", "add", "br0", "type", "bridge")
	must(t, "ip", "-n", bridgeNS, "link", "set", "br0", "up")
	must(t, "ip", "-n", bridgeNS, "link", "set", "lo", "up")
	// The suite's own end: its load and its reads come from .1.
	must(t, "ip", "link", "add", hostLink, "type", "veth", "peer", "name", "vhost", "netns", bridgeNS)
	must(t, "ip", "-n", bridgeNS, "link", "set", "vhost", "master", "br0", "up")
	must(t, "ip", "addr", "add", subnet()+".1/24", "dev", hostLink)
	must(t, "ip", "link", "set", hostLink, "up")
	for name, last := range hostIPs {
		h := &host{name: name, ns: nsPrefix + name, ip: fmt.Sprintf("%s.%d", subnet(), last), port: "v" + name}
		l.hosts[name] = h
		must(t, "ip", "netns", "add", h.ns)
		must(t, "ip", "-n", h.ns, "link", "set", "lo", "up")
		must(t, "ip", "-n", bridgeNS, "link", "add", h.port, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
		must(t, "ip", "-n", bridgeNS, "link", "set", h.port, "master", "br0", "up")
		must(t, "ip", "-n", h.ns, "addr", "add", h.ip+"/24", "dev", "eth0")
		must(t, "ip", "-n", h.ns, "link", "set", "eth0", "up")
		// Every fault rule goes into the chain CHAOS, which INPUT and
		// OUTPUT jump to first: healing is flushing it.
		must(t, "ip", "netns", "exec", h.ns, "iptables", "-N", "CHAOS")
		must(t, "ip", "netns", "exec", h.ns, "iptables", "-I", "INPUT", "-j", "CHAOS")
		must(t, "ip", "netns", "exec", h.ns, "iptables", "-I", "OUTPUT", "-j", "CHAOS")
	}
	// Probe netem once on a host's interface: some kernels (small VMs)
	// are built without it.
	p := l.hosts["provider"]
	if _, err := sh("ip", "netns", "exec", p.ns, "tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "1ms"); err == nil {
		l.netem = true
		_, _ = sh("ip", "netns", "exec", p.ns, "tc", "qdisc", "del", "dev", "eth0", "root")
	}
	return l
}

// ipt runs iptables in h's namespace.
func (l *lab) ipt(h *host, args ...string) error {
	_, err := sh("ip", append([]string{"netns", "exec", h.ns, "iptables"}, args...)...)
	return err
}

// tc runs tc in h's namespace.
func (l *lab) tc(h *host, args ...string) error {
	_, err := sh("ip", append([]string{"netns", "exec", h.ns, "tc"}, args...)...)
	return err
}

// dropFrom makes h drop every packet that arrives from src: one direction
// of a partition. A DROP on arrival, not on sending, so the sender sees
// silence (as on a real cut link), not a local error.
func (l *lab) dropFrom(h, src *host) error {
	return l.ipt(h, "-A", "CHAOS", "-s", src.ip, "-j", "DROP")
}

// cut partitions a and b in both directions.
func (l *lab) cut(a, b *host) error {
	if err := l.dropFrom(a, b); err != nil {
		return err
	}
	return l.dropFrom(b, a)
}

// lossFrom makes h drop a random share p of what arrives from src.
func (l *lab) lossFrom(h, src *host, p float64) error {
	return l.ipt(h, "-A", "CHAOS", "-s", src.ip, "-m", "statistic", "--mode", "random",
		"--probability", fmt.Sprintf("%.3f", p), "-j", "DROP")
}

// degrade adds loss (a share) and delay (milliseconds, with jitter of a
// fifth) to what from sends to to, in that direction only. With netem it
// is one netem qdisc on from's eth0 for packets to to's address; without,
// loss is dropped on arrival and delay comes from a slow htb class. It
// returns a description of what it did.
func (l *lab) degrade(from, to *host, loss float64, delayMS int) (string, error) {
	if l.netem {
		if err := l.tc(from, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "prio", "bands", "4"); err != nil {
			return "", err
		}
		args := []string{"qdisc", "add", "dev", "eth0", "parent", "1:4", "handle", "40:", "netem",
			"delay", fmt.Sprintf("%dms", delayMS), fmt.Sprintf("%dms", max(1, delayMS/5))}
		if loss > 0 {
			args = append(args, "loss", fmt.Sprintf("%.1f%%", loss*100))
		}
		if err := l.tc(from, args...); err != nil {
			return "", err
		}
		if err := l.tc(from, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1",
			"u32", "match", "ip", "dst", to.ip+"/32", "flowid", "1:4"); err != nil {
			return "", err
		}
		return fmt.Sprintf("netem %s->%s loss %.0f%% delay %dms", from.name, to.name, loss*100, delayMS), nil
	}
	// A 256 kbit/s class: a full-size packet waits about 47 ms for its
	// own transmission, and more behind others; a queueing delay, not a
	// fixed one.
	if err := l.tc(from, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"); err != nil {
		return "", err
	}
	if err := l.tc(from, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit"); err != nil {
		return "", err
	}
	if err := l.tc(from, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:4", "htb", "rate", "256kbit"); err != nil {
		return "", err
	}
	if err := l.tc(from, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1",
		"u32", "match", "ip", "dst", to.ip+"/32", "flowid", "1:4"); err != nil {
		return "", err
	}
	if loss > 0 {
		if err := l.lossFrom(to, from, loss); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("iptables loss %.0f%% + htb 256kbit %s->%s (no netem in this kernel)", loss*100, from.name, to.name), nil
}

// setLink sets h's bridge port up or down: to h, its link flaps.
func (l *lab) setLink(h *host, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	l.mu.Lock()
	l.flaps[h.name] = !up
	l.mu.Unlock()
	_, err := sh("ip", "-n", bridgeNS, "link", "set", h.port, state)
	return err
}

// heal removes every fault: the CHAOS chains are flushed, qdiscs removed
// and bridge ports set up. It returns the first error.
func (l *lab) heal() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, h := range l.hosts {
		keep(l.ipt(h, "-F", "CHAOS"))
		// No qdisc of the suite's (the default noqueue) is the usual
		// case, and deleting that is an error; so only the suite's kinds
		// are deleted.
		out, _ := sh("ip", "netns", "exec", h.ns, "tc", "qdisc", "show", "dev", "eth0")
		if strings.Contains(out, "qdisc prio 1:") || strings.Contains(out, "qdisc htb 1:") {
			keep(l.tc(h, "qdisc", "del", "dev", "eth0", "root"))
		}
		l.mu.Lock()
		down := l.flaps[h.name]
		l.mu.Unlock()
		if down {
			keep(l.setLink(h, true))
		}
		// What heal claims, checked: the chain is empty and no qdisc of
		// the suite's is left.
		rules, err := sh("ip", "netns", "exec", h.ns, "iptables", "-S", "CHAOS")
		keep(err)
		if strings.TrimSpace(rules) != "-N CHAOS" {
			keep(fmt.Errorf("%s: CHAOS chain not empty after heal: %s", h.name, rules))
		}
		out, _ = sh("ip", "netns", "exec", h.ns, "tc", "qdisc", "show", "dev", "eth0")
		if strings.Contains(out, "qdisc prio 1:") || strings.Contains(out, "qdisc htb 1:") {
			keep(fmt.Errorf("%s: qdisc left after heal: %s", h.name, out))
		}
	}
	return first
}
