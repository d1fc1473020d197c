// Package mps runs NVIDIA MPS control daemons that hold their clients to a cap set on the
// server side, one daemon per card and distinct cap, and is the folder protocol between
// share-plugin, which decides which daemons a node needs, and gpushare-mps, which runs them.
//
// A daemon lives in its own folder under the MPS root (share-plugin's --mps-root,
// gpushare-mps's --root; both default gpushare.DefaultMPSRoot):
//
//	<root>/<card UUID>/<cap name>/   e.g. /run/gpushare/mps/GPU-…/m4096-t100
//	    want    written by share-plugin: it needs this daemon (JSON Want)
//	    pipe/   the daemon's pipes and sockets (CUDA_MPS_PIPE_DIRECTORY of it and its clients)
//	    log/    control.log and server.log (CUDA_MPS_LOG_DIRECTORY)
//	    shm/    the daemon's and its clients' /dev/shm (a tmpfs of its own)
//	    ready   written by gpushare-mps once the daemon answers with its caps set (JSON Ready)
//	    failed  written by gpushare-mps when the daemon could not be started (the reason)
//
// The cap is set with the control daemon's set_default_device_pinned_mem_limit and
// set_default_active_thread_percentage, which hold every client the daemon serves: a client's
// own CUDA_MPS_* environment can lower them, never raise them (measured on an NVIDIA H200,
// driver 580.159.04; docs/isolation.md). Clients with the same cap on a card share a daemon.
//
// The file handover keeps both programs restartable on their own: a share-plugin restart
// leaves the daemons running (their clients keep their contexts), and a restarted gpushare-mps
// starts again every daemon that is still wanted. share-plugin removes a want once no pod of
// the node holds that cap on that card; gpushare-mps then stops the daemon and removes its
// folder.
package mps
