package kubeletports

import (
	"maps"
	"testing"
)

func TestHoldersKeepAPortWithTheFirstByName(t *testing.T) {
	r := Range{First: 10250, Count: 3}
	got := Holders(map[string]int32{"b": 10250, "a": 10250, "c": 10251, "d": 9000, "e": 10253}, r)
	want := map[int32]string{10250: "a", 10251: "c"}
	if !maps.Equal(got, want) {
		t.Errorf("holders %v, want %v (outside the range: none)", got, want)
	}
	if (Range{First: 10250}).Contains(10250) {
		t.Error("an empty range contains no port")
	}
}
