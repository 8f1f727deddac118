//lint:file-ignore SA1019 dashboard.json is in the classic dashboard JSON model, which the SDK marks deprecated in favour of its v2 resource format (see decodeDashboard)

package monitoring_test

import (
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Grafana is not run here, so the dashboard is checked against Grafana's
// own dashboard schema: the Go types grafana-foundation-sdk generates from
// it, with every panel plugin's options and the Prometheus query schema
// registered. Decoding is strict (an unknown field, a wrong type or a
// missing required field fails) and the schema's constraints are checked.

var registerPlugins sync.Once

// decodeDashboard decodes raw strictly and validates it. The schema is
// the classic dashboard JSON model, the one Grafana imports and exports;
// the SDK marks it deprecated in favour of its v2 resource format, which
// is another format, not a newer check of this one.
func decodeDashboard(raw []byte) (*dashboard.Dashboard, error) {
	registerPlugins.Do(plugins.RegisterDefaultPlugins)
	var d dashboard.Dashboard
	if err := noErrors(d.UnmarshalJSONStrict(raw)); err != nil {
		return nil, err
	}
	// The SDK drops every panel whose (empty) error list came back as a
	// non-nil error: decode them one by one, so that they are validated
	// too.
	var doc struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	d.Panels = nil
	for _, r := range doc.Panels {
		var p dashboard.PanelOrRowPanel
		var kind struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(r, &kind); err != nil {
			return nil, err
		}
		if kind.Type == "row" {
			p.RowPanel = &dashboard.RowPanel{}
			if err := noErrors(p.RowPanel.UnmarshalJSONStrict(r)); err != nil {
				return nil, err
			}
		} else {
			p.Panel = &dashboard.Panel{}
			if err := noErrors(p.Panel.UnmarshalJSONStrict(r)); err != nil {
				return nil, err
			}
		}
		d.Panels = append(d.Panels, p)
	}
	return &d, d.Validate()
}

// noErrors is err, or nil for the strict decoder's empty error list, which
// it returns as a non-nil error.
func noErrors(err error) error {
	if be := (cog.BuildErrors)(nil); errors.As(err, &be) && len(be) == 0 {
		return nil
	}
	return err
}

func TestDashboardSchema(t *testing.T) {
	raw, err := os.ReadFile("dashboard.json")
	require.NoError(t, err)
	d, err := decodeDashboard(raw)
	require.NoError(t, err)
	require.NotNil(t, d.Title)
	assert.Equal(t, "mcs-dns", *d.Title)
	n := 0
	for _, p := range d.Panels {
		if p.Panel != nil {
			n++
		}
	}
	assert.Len(t, dashboardExprs(t), n, "every panel decoded")

	// The check is strict: a misspelt option, a missing required one and
	// a misspelt field of a Prometheus query, in a copy, are reported by
	// path.
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	panel := doc["panels"].([]any)[3].(map[string]any)
	opts := panel["options"].(map[string]any)
	opts["legnd"] = opts["legend"]
	delete(opts, "tooltip")
	target := panel["targets"].([]any)[0].(map[string]any)
	target["legendFromat"] = target["legendFormat"]
	bad, err := json.Marshal(doc)
	require.NoError(t, err)
	_, err = decodeDashboard(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "panels[3].options.tooltip: required field is missing from input")
	assert.Contains(t, err.Error(), "unexpected field 'legnd'")
	assert.Contains(t, err.Error(), "panels[3].targets[0]")
	assert.Contains(t, err.Error(), "unexpected field 'legendFromat'")
}
