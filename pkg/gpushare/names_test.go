package gpushare

import "testing"

func TestFakeDeviceIDRoundTrip(t *testing.T) {
	id := FakeDeviceID("GPU-1234-abcd", 13)
	if id != "GPU-1234-abcd-_-13" {
		t.Fatalf("FakeDeviceID = %q", id)
	}
	uuid, j, err := ParseFakeDeviceID(id)
	if err != nil || uuid != "GPU-1234-abcd" || j != 13 {
		t.Fatalf("ParseFakeDeviceID(%q) = %q, %d, %v", id, uuid, j, err)
	}
	for _, bad := range []string{"", "GPU-1", "-_-3", "GPU-1-_-x", "GPU-1-_--2"} {
		if _, _, err := ParseFakeDeviceID(bad); err == nil {
			t.Errorf("ParseFakeDeviceID(%q) succeeded, want error", bad)
		}
	}
}

func TestResourcesValidate(t *testing.T) {
	if err := DefaultResources().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	for _, r := range []Resources{{Mem: "", Count: "a/b"}, {Mem: "a/b"}, {Mem: "a/b", Count: "a/b"}} {
		if err := r.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want error", r)
		}
	}
}
