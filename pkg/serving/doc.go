// Package serving puts the extender's HTTP handlers on the network: mutually authenticated
// TLS whose serving certificate and client CA are re-read from their files when they change
// (k8s.io/apiserver's dynamiccertificates), or plain HTTP when explicitly asked for. It
// opens listeners and guards handlers (a certificate of the client CA for each path but the
// probes; on the scheduler verbs, also a name of Options.ClientAllowedNames); what is served
// is pkg/routes' business.
package serving
