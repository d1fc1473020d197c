// Command pause is the sandbox ("pause") image of the local cluster's containerd: it holds
// the pod's namespaces by sleeping until SIGTERM or SIGINT. No registry is reachable here, so
// the upstream registry.k8s.io/pause cannot be pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
