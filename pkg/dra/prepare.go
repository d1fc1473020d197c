package dra

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// envCUDAVisibleDevices is set to the claim's card UUIDs, as the device plugin's
// per-allocation spec does, so that a value the pod sets itself does not decide which
// cards CUDA sees.
const envCUDAVisibleDevices = "CUDA_VISIBLE_DEVICES"

// PrepareResourceClaims prepares each claim: its allocation results of this driver become
// one CDI device (gpushare.io/claim=<claim UID>) holding the claim's cards and the
// ALIYUN_COM_GPU_MEM_* variables of its share, and the claim is checkpointed. A claim
// already prepared gets the same answer again, while its allocation is the one prepared
// (checkSameAllocation). A claim fails, with a reason kubelet puts in the pod's events, when
// a result names no card of this node, consumes memory that is not whole units, asks more
// of a card than the card has or than is left beside the claims already prepared, or lands
// on a card that is unhealthy now.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		p, err := d.prepare(ctx, claim)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Preparing a claim failed", "claim", klog.KObj(claim))
			out[claim.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, err)}
			continue
		}
		out[claim.UID] = kubeletplugin.PrepareResult{Devices: resultDevices(p)}
	}
	return out, nil
}

// prepare prepares one claim and records it. Called with d.mu held.
func (d *Driver) prepare(ctx context.Context, claim *resourceapi.ResourceClaim) (PreparedClaim, error) {
	if p, ok := d.prepared[claim.UID]; ok {
		// Repeated by kubelet (e.g. after its restart): the containers may already run, so
		// the answer must not change with the cards' health or the node's labels; the spec
		// is rewritten in case the runtime's folder lost it, and so are those of the pod's
		// other claims, in case an earlier prepare failed half-way through them. Only the
		// same allocation gets the old answer.
		if err := d.checkSameAllocation(claim, p); err != nil {
			return PreparedClaim{}, err
		}
		if _, err := d.writeSpec(claim.UID, p.Devices, p.Limit, p.RuntimeCDIDevices, d.podGrant(p.PodUID, nil)); err != nil {
			return PreparedClaim{}, err
		}
		if p.Limit {
			if err := d.rewritePodSpecs(p.PodUID, claim.UID); err != nil {
				return PreparedClaim{}, err
			}
		}
		return p, nil
	}
	devices, err := d.claimDevices(claim)
	if err != nil {
		return PreparedClaim{}, err
	}
	limit, err := d.limit(ctx)
	if err != nil {
		return PreparedClaim{}, err
	}
	pod := consumerPod(claim)
	if limit {
		if err := onePod(claim); err != nil {
			return PreparedClaim{}, err
		}
		if pod, err = podOf(claim); err != nil {
			return PreparedClaim{}, err
		}
	}
	runtimeDevices := d.runtimeDevices(devices)
	id, err := d.writeSpec(claim.UID, devices, limit, runtimeDevices, d.podGrant(pod, devices))
	if err != nil {
		return PreparedClaim{}, err
	}
	p := PreparedClaim{Namespace: claim.Namespace, Name: claim.Name, CDIDeviceID: id, RuntimeCDIDevices: runtimeDevices, Devices: devices, Limit: limit, PodUID: pod}
	next := maps.Clone(d.prepared)
	next[claim.UID] = p
	if err := saveCheckpoint(d.checkpoint, d.cfg.Inventory.Unit, next); err != nil {
		err = failed(reasonCheckpoint, err)
		// Unrecorded, the spec would outlive an unprepare after a restart.
		if rmErr := nodecards.RemoveClaimSpec(d.cfg.Specs.Dir, claim.UID); rmErr != nil {
			return PreparedClaim{}, fmt.Errorf("%w (and %w)", err, rmErr)
		}
		return PreparedClaim{}, err
	}
	d.prepared = next
	// Only now, with the claim recorded, may the pod's other specs carry the larger sum.
	if err := d.rewritePodSpecs(pod, claim.UID); err != nil {
		return PreparedClaim{}, err
	}
	return p, nil
}

// onePod refuses, on a limit node, a claim reserved for more than one pod: the claim's spec
// gives each consuming container the claim's whole memory as its own hard limit, so pods
// sharing it could together take a multiple of what the scheduler counted. Consumers that
// are not pods are counted too: nothing holds them to the claim either.
func onePod(claim *resourceapi.ResourceClaim) error {
	if n := len(claim.Status.ReservedFor); n > 1 {
		names := make([]string, 0, n)
		for _, r := range claim.Status.ReservedFor {
			names = append(names, r.Resource+"/"+r.Name)
		}
		return failed(reasonSharedClaim, fmt.Errorf("it is reserved for %d consumers (%s), and on a node labelled %s=%s a claim serves one pod: each consumer would get the claim's whole memory as its own limit; give each pod its own claim (a ResourceClaimTemplate)",
			n, strings.Join(names, ", "), gpushare.LabelIsolation, gpushare.IsolationLimit))
	}
	return nil
}

// claimDevices reads the claim's allocation results of this driver and checks them against
// the cards and the claims already prepared. Called with d.mu held.
func (d *Driver) claimDevices(claim *resourceapi.ResourceClaim) ([]PreparedDevice, error) {
	if claim.Status.Allocation == nil {
		return nil, failed(reasonNotAllocated, errors.New("not allocated"))
	}
	var devices []PreparedDevice
	asked := map[int]int64{} // card index → units this claim asks
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != gpushare.DRADriverName {
			continue
		}
		card, ok := d.cards[r.Device]
		if !ok || r.Pool != d.cfg.NodeName {
			return nil, failed(reasonUnknownDevice, fmt.Errorf("request %s: device %s/%s is no card of node %s", r.Request, r.Pool, r.Device, d.cfg.NodeName))
		}
		units, err := d.consumedUnits(r, card)
		if err != nil {
			return nil, failed(reasonInvalidCapacity, fmt.Errorf("request %s: %w", r.Request, err))
		}
		if !d.healthy(card.UUID) {
			return nil, failed(reasonUnhealthy, fmt.Errorf("request %s: card %d (%s) is unhealthy", r.Request, card.Index, card.UUID))
		}
		asked[card.Index] += units
		devices = append(devices, PreparedDevice{
			Request: r.Request, Pool: r.Pool, Device: r.Device, ShareID: r.ShareID,
			CardIndex: card.Index, CardUUID: card.UUID, Units: units,
		})
	}
	if len(devices) == 0 {
		return nil, failed(reasonNotAllocated, fmt.Errorf("no device of driver %s is allocated to it", gpushare.DRADriverName))
	}
	used := d.preparedUnits()
	for _, idx := range slices.Sorted(maps.Keys(asked)) {
		card := d.cards[DeviceName(idx)]
		if asked[idx] > card.Units {
			return nil, failed(reasonOverCard, fmt.Errorf("it asks %d %s units of card %d, which has %d", asked[idx], d.cfg.Inventory.Unit, idx, card.Units))
		}
		if left := card.Units - used[idx]; asked[idx] > left {
			return nil, failed(reasonOverFree, fmt.Errorf("it asks %d %s units of card %d, but claims already prepared hold %d of its %d", asked[idx], d.cfg.Inventory.Unit, idx, used[idx], card.Units))
		}
	}
	return devices, nil
}

// consumedUnits is the memory result r consumes of card, in units: its consumedCapacity,
// or the whole card when the allocator recorded none (gpushare.DRAConsumedUnits, the rule
// the scheduler plugin and inspect read claims by). Errors: memory that is not a positive
// whole number of units.
func (d *Driver) consumedUnits(r resourceapi.DeviceRequestAllocationResult, card gpushare.Device) (int64, error) {
	u, err := gpushare.DRAConsumedUnits(&r, d.cfg.Inventory.Unit, card.Units)
	if err != nil {
		return 0, fmt.Errorf("card %d: %w", card.Index, err)
	}
	return u, nil
}

// preparedUnits is what the prepared claims hold, in units by card index. Called with
// d.mu held.
func (d *Driver) preparedUnits() map[int]int64 {
	used := map[int]int64{}
	for _, p := range d.prepared {
		for _, dev := range p.Devices {
			used[dev.CardIndex] += dev.Units
		}
	}
	return used
}

// limit reports whether the node's isolation label asks for hard limits, which the
// claim's spec then enforces with gpushare-limit-hook. Errors: a label that cannot be read,
// one asking for MPS (not done by this back end), or limits the node cannot enforce.
func (d *Driver) limit(ctx context.Context) (bool, error) {
	if d.cfg.Isolation == nil {
		return false, nil
	}
	iso, err := d.cfg.Isolation(ctx)
	if err != nil {
		return false, failed(reasonIsolation, fmt.Errorf("reading node %s's isolation: %w", d.cfg.NodeName, err))
	}
	switch iso {
	case gpushare.IsolationMPS:
		return false, failed(reasonIsolation, fmt.Errorf("node %s is labelled %s=%s, which the DRA back end does not enforce", d.cfg.NodeName, gpushare.LabelIsolation, iso))
	case gpushare.IsolationLimit:
		if why := limitUnavailable(d.cfg.LimitUnsupported, d.cfg.IsolationBlocker); why != nil {
			return false, failed(reasonIsolation, fmt.Errorf("node %s is labelled %s=%s but cannot enforce it: %w", d.cfg.NodeName, gpushare.LabelIsolation, iso, why))
		}
		return true, nil
	}
	return false, nil
}

// runtimeDevices are the runtime's own devices (<CDIKind>=<UUID>) of the cards of devices
// that its CDI registry holds, in the cards' order; none without a CDIKind. Through them a
// container gets what NVIDIA's spec brings (the driver's libraries), which a tenant-safe
// runtime no longer adds for NVIDIA_VISIBLE_DEVICES.
func (d *Driver) runtimeDevices(devices []PreparedDevice) []string {
	if d.cfg.CDIKind == "" {
		return nil
	}
	cards, _, _ := claimEnv(d.cards, devices)
	dirs := d.cfg.CDIRegistryDirs
	if dirs == nil {
		dirs = nodecards.RegistryDirs(d.cfg.Specs.Dir)
	}
	found, _ := nodecards.RuntimeCardDevices(dirs, d.cfg.CDIKind, cards)
	return found
}

// writeSpec writes the claim's CDI spec for devices, with the limit hook when limit: each
// consuming container held to the claim's memory on each of its cards, and pod, the pod the
// claim is prepared for, to its grant (podGrant); it returns the spec's device ID. The cards
// runtimeDevices name are left out of the spec's edits: the runtime's own devices give them.
func (d *Driver) writeSpec(uid types.UID, devices []PreparedDevice, limit bool, runtimeDevices []string, pod nodecards.PodGrant) (string, error) {
	cards, units, env := claimEnv(d.cards, devices)
	var hooks []*cdispec.Hook
	if limit {
		hooks = []*cdispec.Hook{nodecards.LimitHook(nodecards.LimitHookConfig{
			Path: d.cfg.LimitHookPath, SimulatedCardDir: d.cfg.Specs.SimulatedCardDir, FailureDir: d.cfg.LimitHookFailureDir,
		}, d.cfg.Inventory.Unit, cards, units, nil, pod)}
	}
	own := slices.DeleteFunc(slices.Clone(cards), func(c gpushare.Device) bool {
		return slices.ContainsFunc(runtimeDevices, func(id string) bool { return strings.HasSuffix(id, "="+c.UUID) })
	})
	id, err := d.cfg.Specs.WriteClaimSpec(uid, own, env, hooks)
	if err != nil {
		return "", failed(reasonCDISpec, fmt.Errorf("writing its CDI spec: %w", err))
	}
	return id, nil
}

// claimEnv is what a container of the claim sees, as the device plugin's containers do:
// its cards' UUIDs (NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES) and indexes, in the
// order of the claim's results, the claim's units (ALIYUN_COM_GPU_MEM_CONTAINER) and the
// size of its first card. ALIYUN_COM_GPU_MEM_POD is left out: a claim does not know the
// pod's other claims. Returns the distinct cards too, with the claim's units of each.
func claimEnv(byName map[string]gpushare.Device, devices []PreparedDevice) ([]gpushare.Device, []int64, map[string]string) {
	var cards []gpushare.Device
	var perCard []int64
	var uuids, idx []string
	var units int64
	at := map[string]int{} // device name → index in cards
	for _, dev := range devices {
		units += dev.Units
		if i, seen := at[dev.Device]; seen {
			perCard[i] += dev.Units
			continue
		}
		at[dev.Device] = len(cards)
		card := byName[dev.Device]
		cards = append(cards, card)
		perCard = append(perCard, dev.Units)
		uuids = append(uuids, card.UUID)
		idx = append(idx, strconv.Itoa(card.Index))
	}
	return cards, perCard, map[string]string{
		gpushare.EnvVisibleDevices: strings.Join(uuids, ","),
		envCUDAVisibleDevices:      strings.Join(uuids, ","),
		gpushare.EnvIndex:          strings.Join(idx, ","),
		gpushare.EnvContainerUnits: strconv.FormatInt(units, 10),
		gpushare.EnvDevUnits:       strconv.FormatInt(cards[0].Units, 10),
	}
}

// resultDevices is the answer for a prepared claim: one entry per allocation result. The
// claim's CDI devices go on the first entry, for all of the claim's requests, so that a
// container given the claim gets them once, not once per card: the runtime's own card
// devices first, then the claim's, whose variables (NVIDIA_VISIBLE_DEVICES among them) so
// win over what the runtime's devices set.
func resultDevices(p PreparedClaim) []kubeletplugin.Device {
	if len(p.Devices) == 0 {
		return nil
	}
	var requests []string
	for _, dev := range p.Devices {
		if !slices.Contains(requests, dev.Request) {
			requests = append(requests, dev.Request)
		}
	}
	out := make([]kubeletplugin.Device, len(p.Devices))
	for i, dev := range p.Devices {
		out[i] = kubeletplugin.Device{Requests: []string{dev.Request}, PoolName: dev.Pool, DeviceName: dev.Device, ShareID: dev.ShareID}
	}
	out[0].Requests = requests
	out[0].CDIDeviceIDs = append(slices.Clone(p.RuntimeCDIDevices), p.CDIDeviceID)
	return out
}
