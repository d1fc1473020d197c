package gpushare

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Device is one card of a node as share-plugin publishes it.
type Device struct {
	Index     int    `json:"index"`               // NVML index
	UUID      string `json:"uuid,omitempty"`      // NVML UUID ("GPU-…"); empty in the fallback
	Model     string `json:"model,omitempty"`     // NVML product name, e.g. "Tesla T4"
	Units     int64  `json:"units"`               // gpu-mem units of this card
	MemoryMiB int64  `json:"memoryMiB,omitempty"` // card memory as NVML reports it
	Healthy   bool   `json:"healthy"`             // false: the card takes no new pods
}

// Inventory is the per-card inventory of a node: the JSON value of AnnotationNodeInventory,
// e.g. {"unit":"GiB","devices":[{"index":0,"uuid":"GPU-…","model":"Tesla T4","units":14,
// "memoryMiB":15079,"healthy":true}]}.
type Inventory struct {
	Unit    Unit     `json:"unit"`
	Devices []Device `json:"devices"`
}

// InventorySource says where an inventory came from.
type InventorySource string

const (
	// FromAnnotation: share-plugin's AnnotationNodeInventory.
	FromAnnotation InventorySource = "annotation"
	// FromAllocatable: allocatable gpu-mem / gpu-count identical cards (old device plugin,
	// hand-made nodes).
	FromAllocatable InventorySource = "allocatable"
)

// TotalUnits sums the units of all cards, healthy or not.
func (inv Inventory) TotalUnits() int64 {
	var t int64
	for _, d := range inv.Devices {
		t += d.Units
	}
	return t
}

// Device returns the card with the given index.
func (inv Inventory) Device(index int) (Device, bool) {
	for _, d := range inv.Devices {
		if d.Index == index {
			return d, true
		}
	}
	return Device{}, false
}

// Marshal encodes the inventory as the annotation value.
func (inv Inventory) Marshal() (string, error) {
	b, err := json.Marshal(inv)
	if err != nil {
		return "", fmt.Errorf("encoding gpu inventory: %w", err)
	}
	return string(b), nil
}

// ParseInventory decodes and validates an AnnotationNodeInventory value: card indexes must be
// unique and non-negative, and every value within the bounds of checkRange (a *RangeError
// otherwise).
func ParseInventory(s string) (Inventory, error) {
	var inv Inventory
	if err := json.Unmarshal([]byte(s), &inv); err != nil {
		return Inventory{}, fmt.Errorf("annotation %s: %w", AnnotationNodeInventory, err)
	}
	seen := make(map[int]bool, len(inv.Devices))
	for _, d := range inv.Devices {
		switch {
		case d.Index < 0:
			return Inventory{}, fmt.Errorf("annotation %s: card index %d is negative", AnnotationNodeInventory, d.Index)
		case seen[d.Index]:
			return Inventory{}, fmt.Errorf("annotation %s: card index %d appears twice", AnnotationNodeInventory, d.Index)
		}
		seen[d.Index] = true
	}
	if inv.Unit.MiB == 0 {
		inv.Unit = GiB
	}
	if err := checkRange(inv); err != nil {
		return Inventory{}, fmt.Errorf("annotation %s: %w", AnnotationNodeInventory, err)
	}
	return inv, nil
}

// NodeInventory returns the node's cards: from AnnotationNodeInventory when present and
// valid, else allocatable[Mem] / allocatable[Count] identical healthy cards (per-card units
// rounded down). A node without gpu-mem has no cards. The error is non-nil when the
// annotation is malformed (the fallback is still returned, so callers can log and go on) or
// when the node has gpu-mem but no usable gpu-count. A value out of range (*RangeError, in
// the annotation or in allocatable) leaves the node without cards, fallback included.
func (r Resources) NodeInventory(node *corev1.Node) (Inventory, InventorySource, error) {
	var annErr error
	if s, ok := node.Annotations[AnnotationNodeInventory]; ok {
		inv, err := ParseInventory(s)
		if err == nil {
			return inv, FromAnnotation, nil
		}
		if errors.As(err, new(*RangeError)) {
			return Inventory{Unit: GiB}, FromAnnotation, err
		}
		annErr = err
	}
	inv, err := r.allocatableInventory(node)
	if err == nil {
		err = annErr
	}
	return inv, FromAllocatable, err
}

func (r Resources) allocatableInventory(node *corev1.Node) (Inventory, error) {
	inv := Inventory{Unit: GiB}
	memQ, ok := node.Status.Allocatable[r.Mem]
	if !ok || memQ.Value() <= 0 {
		return inv, nil
	}
	mem := memQ.Value()
	countQ, ok := node.Status.Allocatable[r.Count]
	if !ok || countQ.Value() <= 0 {
		return inv, fmt.Errorf("node %s: allocatable %s is %d but %s is missing (cannot tell the card size)",
			node.Name, r.Mem, mem, r.Count)
	}
	count := countQ.Value()
	if count > MaxCards {
		return inv, fmt.Errorf("node %s: allocatable %s: %w", node.Name, r.Count, &RangeError{What: "card count", Value: count, Max: MaxCards})
	}
	per := mem / count
	if per > MaxCardUnits {
		return inv, fmt.Errorf("node %s: allocatable %s / %s: %w", node.Name, r.Mem, r.Count, &RangeError{What: "units per card", Value: per, Max: MaxCardUnits})
	}
	inv.Devices = make([]Device, count)
	for i := range inv.Devices {
		inv.Devices[i] = Device{Index: i, Units: per, Healthy: true}
	}
	return inv, nil
}
