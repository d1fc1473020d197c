package nvml

// applicationXIDs are XIDs that an application's own bug causes (page faults, engine
// exceptions, preemption clean-up, context-switch timeouts): the card itself is fine, so they
// must not take it out of service. The list follows NVIDIA's k8s-device-plugin.
var applicationXIDs = map[uint64]bool{
	13:  true, // Graphics Engine Exception
	31:  true, // GPU memory page fault
	43:  true, // GPU stopped processing
	45:  true, // Preemptive cleanup, due to previous errors
	68:  true, // Video processor exception
	109: true, // Context Switch Timeout Error
}

// IsApplicationXID reports whether xid is caused by an application rather than the card.
func IsApplicationXID(xid uint64) bool { return applicationXIDs[xid] }

// XIDFallenOffBus is the XID a simulated fault raises: the GPU has fallen off the bus.
const XIDFallenOffBus = 79
