package members

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The MCS writes, at the version the member serves. Objects go in and come
// out as v1beta1.

func (m *Member) alphaExports() bool { return m.ExportVersion == "v1alpha1" }
func (m *Member) alphaImports() bool { return m.ImportVersion == "v1alpha1" }

// GetExport reads a ServiceExport from the API (not the cache).
func (m *Member) GetExport(ctx context.Context, ns, name string) (*mcsv1beta1.ServiceExport, error) {
	if m.alphaExports() {
		o, err := m.MCS.MulticlusterV1alpha1().ServiceExports(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return exportToBeta(o), nil
	}
	return m.MCS.MulticlusterV1beta1().ServiceExports(ns).Get(ctx, name, metav1.GetOptions{})
}

// UpdateExportStatus writes a ServiceExport's status.
func (m *Member) UpdateExportStatus(ctx context.Context, e *mcsv1beta1.ServiceExport) error {
	var got *mcsv1beta1.ServiceExport
	if m.alphaExports() {
		o, err := m.MCS.MulticlusterV1alpha1().ServiceExports(e.Namespace).UpdateStatus(ctx, exportToAlpha(e), metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		got = exportToBeta(o)
	} else {
		o, err := m.MCS.MulticlusterV1beta1().ServiceExports(e.Namespace).UpdateStatus(ctx, e, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		got = o
	}
	m.RecordWrite(got)
	return nil
}

// GetImport reads a ServiceImport from the API (not the cache).
func (m *Member) GetImport(ctx context.Context, ns, name string) (*mcsv1beta1.ServiceImport, error) {
	if m.alphaImports() {
		o, err := m.MCS.MulticlusterV1alpha1().ServiceImports(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return importToBeta(o), nil
	}
	return m.MCS.MulticlusterV1beta1().ServiceImports(ns).Get(ctx, name, metav1.GetOptions{})
}

// CreateImport creates a ServiceImport (status is ignored by the API).
func (m *Member) CreateImport(ctx context.Context, si *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
	return m.recorded(m.createImport(ctx, si))
}

func (m *Member) createImport(ctx context.Context, si *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
	if m.alphaImports() {
		o, err := m.MCS.MulticlusterV1alpha1().ServiceImports(si.Namespace).Create(ctx, importToAlpha(si), metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		return importToBeta(o), nil
	}
	return m.MCS.MulticlusterV1beta1().ServiceImports(si.Namespace).Create(ctx, si, metav1.CreateOptions{})
}

// UpdateImport updates a ServiceImport's metadata and spec.
func (m *Member) UpdateImport(ctx context.Context, si *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
	return m.recorded(m.updateImport(ctx, si))
}

func (m *Member) updateImport(ctx context.Context, si *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
	if m.alphaImports() {
		o, err := m.MCS.MulticlusterV1alpha1().ServiceImports(si.Namespace).Update(ctx, importToAlpha(si), metav1.UpdateOptions{})
		if err != nil {
			return nil, err
		}
		return importToBeta(o), nil
	}
	return m.MCS.MulticlusterV1beta1().ServiceImports(si.Namespace).Update(ctx, si, metav1.UpdateOptions{})
}

// UpdateImportStatus updates a ServiceImport's status.
func (m *Member) UpdateImportStatus(ctx context.Context, si *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
	return m.recorded(m.updateImportStatus(ctx, si))
}

func (m *Member) updateImportStatus(ctx context.Context, si *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
	if m.alphaImports() {
		o, err := m.MCS.MulticlusterV1alpha1().ServiceImports(si.Namespace).UpdateStatus(ctx, importToAlpha(si), metav1.UpdateOptions{})
		if err != nil {
			return nil, err
		}
		return importToBeta(o), nil
	}
	return m.MCS.MulticlusterV1beta1().ServiceImports(si.Namespace).UpdateStatus(ctx, si, metav1.UpdateOptions{})
}

// DeleteImport deletes the ServiceImport with that UID (so that an object
// recreated by someone else meanwhile is never deleted).
func (m *Member) DeleteImport(ctx context.Context, ns, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	var err error
	if m.alphaImports() {
		err = m.MCS.MulticlusterV1alpha1().ServiceImports(ns).Delete(ctx, name, opts)
	} else {
		err = m.MCS.MulticlusterV1beta1().ServiceImports(ns).Delete(ctx, name, opts)
	}
	if err == nil || apierrors.IsNotFound(err) {
		m.RecordDelete(&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}})
	}
	return err
}

// recorded records a written import (RecordWrite) and passes it on.
func (m *Member) recorded(si *mcsv1beta1.ServiceImport, err error) (*mcsv1beta1.ServiceImport, error) {
	if err == nil && si != nil {
		m.RecordWrite(si)
	}
	return si, err
}
