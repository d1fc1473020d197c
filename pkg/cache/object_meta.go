package cache

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// objectMeta is the metadata a slim informer object keeps: what client-go's store reads
// (namespace/name for the key, resourceVersion to tell a resync from an update) and the UID.
// It implements metav1.Object, which meta.Accessor and so the informer's key function
// require, in 64 bytes instead of metav1.ObjectMeta's 232: the getters of every other field
// return the zero value and their setters do nothing (nothing sets them on stored objects).
type objectMeta struct {
	name, namespace string
	uid             types.UID
	resourceVersion string
}

var _ metav1.Object = (*objectMeta)(nil)

func metaOf(m *metav1.ObjectMeta) objectMeta {
	return objectMeta{name: m.Name, namespace: m.Namespace, uid: m.UID, resourceVersion: m.ResourceVersion}
}

func (m *objectMeta) GetNamespace() string              { return m.namespace }
func (m *objectMeta) SetNamespace(namespace string)     { m.namespace = namespace }
func (m *objectMeta) GetName() string                   { return m.name }
func (m *objectMeta) SetName(name string)               { m.name = name }
func (m *objectMeta) GetUID() types.UID                 { return m.uid }
func (m *objectMeta) SetUID(uid types.UID)              { m.uid = uid }
func (m *objectMeta) GetResourceVersion() string        { return m.resourceVersion }
func (m *objectMeta) SetResourceVersion(version string) { m.resourceVersion = version }

// Fields a slim object does not keep.

func (*objectMeta) GetGenerateName() string                       { return "" }
func (*objectMeta) SetGenerateName(string)                        {}
func (*objectMeta) GetGeneration() int64                          { return 0 }
func (*objectMeta) SetGeneration(int64)                           {}
func (*objectMeta) GetSelfLink() string                           { return "" }
func (*objectMeta) SetSelfLink(string)                            {}
func (*objectMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (*objectMeta) SetCreationTimestamp(metav1.Time)              {}
func (*objectMeta) GetDeletionTimestamp() *metav1.Time            { return nil }
func (*objectMeta) SetDeletionTimestamp(*metav1.Time)             {}
func (*objectMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (*objectMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (*objectMeta) GetLabels() map[string]string                  { return nil }
func (*objectMeta) SetLabels(map[string]string)                   {}
func (*objectMeta) GetAnnotations() map[string]string             { return nil }
func (*objectMeta) SetAnnotations(map[string]string)              {}
func (*objectMeta) GetFinalizers() []string                       { return nil }
func (*objectMeta) SetFinalizers([]string)                        {}
func (*objectMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (*objectMeta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (*objectMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (*objectMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
