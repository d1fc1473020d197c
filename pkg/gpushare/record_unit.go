package gpushare

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// RecordUnit returns the unit the pod's allocation record says it counts in
// (AnnotationUnit); ok is false when the pod carries no such annotation, whose record then
// counts in the node's unit (records of older writers). An annotation ParseUnit rejects is
// an error.
func RecordUnit(pod *corev1.Pod) (u Unit, ok bool, err error) {
	s, has := pod.Annotations[AnnotationUnit]
	if !has {
		return Unit{}, false, nil
	}
	if u, err = ParseUnit(s); err != nil {
		return Unit{}, false, fmt.Errorf("annotation %s: %w", AnnotationUnit, err)
	}
	return u, true, nil
}

// CheckRecordUnit reports a pod whose allocation record counts in another unit than want,
// the unit of the node it runs on: its unit counts would be read as want's, so the record
// says nothing true about the pod's cards. nil for a record without AnnotationUnit.
func CheckRecordUnit(pod *corev1.Pod, want Unit) error {
	u, ok, err := RecordUnit(pod)
	switch {
	case err != nil:
		return err
	case ok && u.MiB != want.MiB:
		return fmt.Errorf("allocation record counts in %s (annotation %s), the node counts in %s", u, AnnotationUnit, want)
	}
	return nil
}
