// Package serving puts the extender's HTTP handlers on the network: mutually authenticated
// TLS whose serving certificate and client CA are re-read from their files when they change
// (k8s.io/apiserver's dynamiccertificates), or plain HTTP when explicitly asked for. It
// opens listeners and guards handlers; what is served is pkg/routes' business.
package serving
