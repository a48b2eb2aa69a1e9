package quota_test

import (
	"testing"

	"github.com/quotakit/quotakit/quota"
)

func TestAttributesRecordZeroValue(t *testing.T) {
	var a quota.Attributes = &quota.AttributesRecord{}
	if a.GetOperation() != "" || a.GetObject() != nil || a.GetOldObject() != nil || a.IsDryRun() {
		t.Errorf("zero AttributesRecord = %+v, want an empty request", a)
	}
}
