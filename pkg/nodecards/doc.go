// Package nodecards is the node layer below share-plugin's two back ends, the kubelet
// device plugin (pkg/deviceplugin) and the kubelet DRA plugin (pkg/dra): the node's cards
// and how containers are given them. pkg/noderuntime assembles its cards, health and fault
// log into the Node both back ends receive; both back ends also import it for the CDI
// specs and the limit hook. It imports neither, and reaches NVML only through pkg/nvml's
// types.
//
// It holds, one job to a file:
//
//   - cards.go: the node's cards from NVML (BuildCards: index order, each card's size in
//     whole units of the node's gpu-mem unit, floor(MiB / unit MiB)), indexed by NVML index
//     (Set), and the inventory with each card's health now (Inventory);
//   - health.go: card health (Health): a critical XID makes a card unhealthy until
//     no fault was seen for the quiet period;
//   - faults.go: the XID fault relay between NVML's fault watch and Health (FaultLog), which
//     remembers each card's latest critical XID;
//   - CDI specs, every spec share-plugin writes into the runtime's CDI spec folder:
//     simulated_spec.go (the simulated cards' spec and files, the default CDI kind and
//     folder), card_specs.go (CardSpecs: how a spec gives a container its cards, as device
//     nodes or simulated cards' files, each file validated before it is renamed into
//     place), allocation_spec.go (the device plugin's per-allocation specs,
//     gpushare.io/allocation=<pod UID>_<container>, and their removal, also the start-up
//     sweep of those left by pods that went), claim_spec.go (the DRA back end's per-claim
//     specs, gpushare.io/claim=<claim UID>) and runtime_devices.go (the runtime's own
//     <kind>=<UUID> devices in its CDI registry, and the registry's folders);
//   - limit_hook.go: the createRuntime hook entry of gpushare-limit-hook (LimitHook), with
//     each card's limit in MiB, the hook's deadline and failure folder, and the runtime's
//     timeout on it;
//   - limit_hook_failures.go: the hook's failure records, counted once and removed at each
//     scrape (LimitHookFailures, gpushare_limit_hook_failures_total);
//   - isolation_label.go: the node's gpushare.io/isolation-enforced label
//     (PublishEnforcedIsolation);
//   - pods.go: the pods of a pod informer's store (PodsIn).
//
// Memory is in MiB (gpushare.Device.MemoryMiB, limithook.Limit.MiB) or whole units of the
// node's gpushare.Unit (gpushare.Device.Units); nothing here counts bytes.
package nodecards
