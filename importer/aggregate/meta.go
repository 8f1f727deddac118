package aggregate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// reservedPrefix marks the labels and annotations mcs-importer itself
// sets and reads (VIP claims, the clusterset-IP opt-in): an export must
// not be able to forge them on the import through exportedLabels or
// exportedAnnotations (a forged VIP claim would take another import's
// VIP or exhaust the pool).
const reservedPrefix = "mcs-dns.io/"

// reservedKey reports whether key is one mcs-importer owns on a
// ServiceImport.
func reservedKey(key string, annotation bool) bool {
	if strings.HasPrefix(key, reservedPrefix) || strings.Contains(key, "."+reservedPrefix) {
		return true
	}
	if annotation {
		return key == mcsapi.AnnotationDerivedService
	}
	return key == mcsapi.LabelManagedBy
}

// maxExportedAnnotations is the API server's limit on an object's
// annotations in all, less room for the few mcs-importer adds (the
// clusterset-IP opt-in and claim, the derived Service's name).
const maxExportedAnnotations = apivalidation.TotalAnnotationSizeLimitB - 4096

// maxDroppedListed bounds the entries a condition message lists.
const maxDroppedListed = 8

// exportedMeta returns the labels and annotations an export asks for on
// the import (spec.exportedLabels, spec.exportedAnnotations) without the
// ones the API server would reject (which would make every write of the
// import fail, for every export of the name) or that mcs-importer owns,
// and a sorted description of what it left out.
func exportedMeta(e *Export) (labels, annotations map[string]string, dropped []string) {
	spec := e.Export.Spec
	labels = maps.Clone(spec.ExportedLabels)
	for k, v := range spec.ExportedLabels {
		why := ""
		switch {
		case reservedKey(k, false):
			why = "reserved for mcs-importer"
		case len(validation.IsQualifiedName(k)) > 0:
			why = "not a valid label key"
		case len(validation.IsValidLabelValue(v)) > 0:
			why = "not a valid label value"
		}
		if why != "" {
			delete(labels, k)
			dropped = append(dropped, fmt.Sprintf("exportedLabels[%q]: %s", shortKey(k), why))
		}
	}
	annotations = maps.Clone(spec.ExportedAnnotations)
	total := 0
	for k, v := range spec.ExportedAnnotations {
		why := ""
		switch {
		case reservedKey(k, true):
			why = "reserved for mcs-importer"
		case len(validation.IsQualifiedName(strings.ToLower(k))) > 0:
			why = "not a valid annotation key"
		}
		if why != "" {
			delete(annotations, k)
			dropped = append(dropped, fmt.Sprintf("exportedAnnotations[%q]: %s", shortKey(k), why))
			continue
		}
		total += len(k) + len(v)
	}
	if total > maxExportedAnnotations {
		annotations = nil
		dropped = append(dropped, fmt.Sprintf("exportedAnnotations: larger than %d bytes in all", maxExportedAnnotations))
	}
	slices.Sort(dropped)
	return labels, annotations, dropped
}

// maxKeyShown bounds each key quoted in the Valid message: the CRD bounds
// a condition's message (32,768 characters) and a key the schema accepts
// may be far longer; a message over the limit would fail every status
// write of the export, the one saying what is wrong included.
const maxKeyShown = 64

// shortKey is k cut to maxKeyShown bytes (at a character boundary), with
// "..." when cut.
func shortKey(k string) string {
	if len(k) <= maxKeyShown {
		return k
	}
	cut := maxKeyShown
	for cut > 0 && !utf8.RuneStart(k[cut]) {
		cut--
	}
	return k[:cut] + "..."
}

// droppedMessage describes what exportedMeta left out, for the Valid
// condition's message (bounded in length).
func droppedMessage(dropped []string) string {
	if len(dropped) == 0 {
		return ""
	}
	list := dropped
	more := ""
	if len(list) > maxDroppedListed {
		list = list[:maxDroppedListed]
		more = fmt.Sprintf(" and %d more", len(dropped)-maxDroppedListed)
	}
	return "; not copied to the ServiceImport: " + strings.Join(list, ", ") + more
}
