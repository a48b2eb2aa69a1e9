package clusterquota_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotakit/quotakit/clusterquota"
)

// openShiftQuota is a quota.openshift.io/v1 ClusterResourceQuota as
// OpenShift's API server returns it, with every field of its type set.
const openShiftQuota = `{
  "apiVersion": "quota.openshift.io/v1",
  "kind": "ClusterResourceQuota",
  "metadata": {"name": "for-user", "uid": "8b1c", "resourceVersion": "42", "creationTimestamp": "2024-05-01T10:00:00Z"},
  "spec": {
    "selector": {
      "labels": {"matchLabels": {"team": "a"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["dev"]}]},
      "annotations": {"openshift.io/requester": "alice"}
    },
    "quota": {
      "hard": {"pods": "10", "count/secrets": "20", "requests.cpu": "4"},
      "scopes": ["NotTerminating"],
      "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}
    }
  },
  "status": {
    "total": {"hard": {"pods": "10", "count/secrets": "20", "requests.cpu": "4"}, "used": {"pods": "1", "count/secrets": "9", "requests.cpu": "500m"}},
    "namespaces": [
      {"namespace": "alice-dev", "status": {"used": {"pods": "1", "count/secrets": "9", "requests.cpu": "500m"}}},
      {"namespace": "alice-idle", "status": {"used": {"pods": "0", "count/secrets": "0", "requests.cpu": "0"}}}
    ]
  }
}`

// TestOpenShiftLayout decodes an OpenShift ClusterResourceQuota into a
// ClusterQuota, refusing unknown fields, and encodes it back: moving a
// quota over is a change of apiVersion and kind, nothing else.
func TestOpenShiftLayout(t *testing.T) {
	dec := json.NewDecoder(strings.NewReader(openShiftQuota))
	dec.DisallowUnknownFields()
	var cq clusterquota.ClusterQuota
	if err := dec.Decode(&cq); err != nil {
		t.Fatalf("decoding OpenShift's JSON: %v", err)
	}
	if err := clusterquota.Validate(&cq); err != nil {
		t.Errorf("Validate(OpenShift's quota) = %v", err)
	}
	data, err := json.Marshal(&cq)
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(openShiftQuota), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("re-encoded OpenShift quota differs (-want +got):\n%s", diff)
	}
}

// TestZeroJSON pins the JSON of an empty ClusterQuota: the fields without
// omitempty are OpenShift's, and are written even when empty.
func TestZeroJSON(t *testing.T) {
	data, err := json.Marshal(&clusterquota.ClusterQuota{})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"metadata":{},"spec":{"selector":{"labels":null,"annotations":null},"quota":{}},"status":{"total":{},"namespaces":null}}`
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		t.Fatal(err)
	}
	if compact.String() != want {
		t.Errorf("json.Marshal(ClusterQuota{}) =\n%s\nwant\n%s", compact.String(), want)
	}
}
