package members

import (
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// mcs-api v0.5.2 serves v1alpha1 and v1beta1 with the same schema. The
// importer works on v1beta1 types only; these convert at the edge for
// clusters that serve only v1alpha1.

func exportToBeta(in *mcsv1alpha1.ServiceExport) *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{
		TypeMeta:   in.TypeMeta,
		ObjectMeta: in.ObjectMeta,
		Spec:       mcsv1beta1.ServiceExportSpec(in.Spec),
		Status:     mcsv1beta1.ServiceExportStatus(in.Status),
	}
}

func exportToAlpha(in *mcsv1beta1.ServiceExport) *mcsv1alpha1.ServiceExport {
	return &mcsv1alpha1.ServiceExport{
		ObjectMeta: in.ObjectMeta,
		Spec:       mcsv1alpha1.ServiceExportSpec(in.Spec),
		Status:     mcsv1alpha1.ServiceExportStatus(in.Status),
	}
}

func importToBeta(in *mcsv1alpha1.ServiceImport) *mcsv1beta1.ServiceImport {
	out := &mcsv1beta1.ServiceImport{
		TypeMeta:   in.TypeMeta,
		ObjectMeta: in.ObjectMeta,
		Spec: mcsv1beta1.ServiceImportSpec{
			IPs:                   in.Spec.IPs,
			Type:                  mcsv1beta1.ServiceImportType(in.Spec.Type),
			SessionAffinity:       in.Spec.SessionAffinity,
			SessionAffinityConfig: in.Spec.SessionAffinityConfig,
			IPFamilies:            in.Spec.IPFamilies,
			InternalTrafficPolicy: in.Spec.InternalTrafficPolicy,
			TrafficDistribution:   in.Spec.TrafficDistribution,
		},
		Status: mcsv1beta1.ServiceImportStatus{
			EndpointSliceObjects: mcsv1beta1.EndpointSliceObjectsStatus(in.Status.EndpointSliceObjects),
			Conditions:           in.Status.Conditions,
		},
	}
	if in.Spec.Ports != nil {
		out.Spec.Ports = make([]mcsv1beta1.ServicePort, len(in.Spec.Ports))
		for i, p := range in.Spec.Ports {
			out.Spec.Ports[i] = mcsv1beta1.ServicePort(p)
		}
	}
	for _, c := range in.Status.Clusters {
		out.Status.Clusters = append(out.Status.Clusters, mcsv1beta1.ClusterStatus(c))
	}
	return out
}

func importToAlpha(in *mcsv1beta1.ServiceImport) *mcsv1alpha1.ServiceImport {
	out := &mcsv1alpha1.ServiceImport{
		ObjectMeta: in.ObjectMeta,
		Spec: mcsv1alpha1.ServiceImportSpec{
			IPs:                   in.Spec.IPs,
			Type:                  mcsv1alpha1.ServiceImportType(in.Spec.Type),
			SessionAffinity:       in.Spec.SessionAffinity,
			SessionAffinityConfig: in.Spec.SessionAffinityConfig,
			IPFamilies:            in.Spec.IPFamilies,
			InternalTrafficPolicy: in.Spec.InternalTrafficPolicy,
			TrafficDistribution:   in.Spec.TrafficDistribution,
		},
		Status: mcsv1alpha1.ServiceImportStatus{
			EndpointSliceObjects: mcsv1alpha1.EndpointSliceObjectsStatus(in.Status.EndpointSliceObjects),
			Conditions:           in.Status.Conditions,
		},
	}
	if in.Spec.Ports != nil {
		out.Spec.Ports = make([]mcsv1alpha1.ServicePort, len(in.Spec.Ports))
		for i, p := range in.Spec.Ports {
			out.Spec.Ports[i] = mcsv1alpha1.ServicePort(p)
		}
	}
	for _, c := range in.Status.Clusters {
		out.Status.Clusters = append(out.Status.Clusters, mcsv1alpha1.ClusterStatus(c))
	}
	return out
}
