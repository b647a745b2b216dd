package reconcile_test

import (
	"slices"
	"testing"

	"orderd/reconcile"
)

func cand(kind, mid, amount string) reconcile.Candidate {
	return reconcile.Candidate{Kind: kind, Amount: dec(amount), Ref: reconcile.PartOrder{MerchantOrderID: mid}}
}

func TestExplain(t *testing.T) {
	tests := []struct {
		name        string
		drift       string
		cands       []reconcile.Candidate
		method      string
		unexplained string
		orders      []string // merchant order ids chosen, in part order
	}{
		{"no drift", "0", []reconcile.Candidate{cand(reconcile.PartProcessing, "a", "5")}, reconcile.MethodNone, "0", nil},
		{"nothing to explain with", "-12.34", nil, reconcile.MethodNone, "-12.34", nil},
		{"single exact", "147", []reconcile.Candidate{
			cand(reconcile.PartProcessing, "big", "999"), cand(reconcile.PartProcessing, "hit", "147.00"),
		}, reconcile.MethodExact, "0", []string{"hit"}},
		{"pair across kinds", "-30", []reconcile.Candidate{
			cand(reconcile.PartRefundInFlight, "r", "-50"), cand(reconcile.PartProcessing, "p", "20"),
			cand(reconcile.PartProcessing, "q", "7"),
		}, reconcile.MethodExact, "0", []string{"p", "r"}},
		{"smallest subset wins", "10", []reconcile.Candidate{
			cand(reconcile.PartProcessing, "a", "4"), cand(reconcile.PartProcessing, "b", "6"),
			cand(reconcile.PartInDoubt, "c", "10"),
		}, reconcile.MethodExact, "0", []string{"c"}},
		{"boundary preferred at equal size", "5", []reconcile.Candidate{
			cand(reconcile.PartProcessing, "p", "5"), cand(reconcile.PartBoundary, "b", "5"),
		}, reconcile.MethodExact, "0", []string{"b"}},
		{"four members", "1.115", []reconcile.Candidate{
			cand(reconcile.PartProcessing, "a", "1"), cand(reconcile.PartProcessing, "b", "0.1"),
			cand(reconcile.PartProcessing, "c", "0.01"), cand(reconcile.PartProcessing, "d", "0.005"),
			cand(reconcile.PartProcessing, "e", "0.005"), cand(reconcile.PartProcessing, "z", "50"),
		}, reconcile.MethodExact, "0", []string{"a", "b", "c", "d"}},
		{"partial never overshoots", "100", []reconcile.Candidate{
			cand(reconcile.PartProcessing, "a", "60"), cand(reconcile.PartProcessing, "b", "50"),
			cand(reconcile.PartProcessing, "c", "-5"), cand(reconcile.PartProcessing, "d", "30"),
		}, reconcile.MethodPartial, "10", []string{"a", "d"}},
		{"wrong sign explains nothing", "-12.34", []reconcile.Candidate{
			cand(reconcile.PartProcessing, "a", "12.34"),
		}, reconcile.MethodNone, "-12.34", nil},
		{"larger candidate explains nothing", "-12.34", []reconcile.Candidate{
			cand(reconcile.PartRefundInFlight, "a", "-20"),
		}, reconcile.MethodNone, "-12.34", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := reconcile.Explain(dec(tt.drift), tt.cands)
			var got []string
			for _, p := range ex.Parts {
				for _, o := range p.Orders {
					got = append(got, o.MerchantOrderID)
				}
			}
			if ex.Method != tt.method || !ex.Unexplained.Equal(dec(tt.unexplained)) || !slices.Equal(got, tt.orders) {
				t.Fatalf("method %s unexplained %s orders %v; want %s %s %v",
					ex.Method, ex.Unexplained, got, tt.method, tt.unexplained, tt.orders)
			}
			if !ex.Explained.Add(ex.Unexplained).Equal(dec(tt.drift)) {
				t.Fatalf("explained %s + unexplained %s != drift %s", ex.Explained, ex.Unexplained, tt.drift)
			}
		})
	}
}

func TestExplain_manyCandidatesStaysBounded(t *testing.T) {
	var cs []reconcile.Candidate
	for i := range 5000 {
		cs = append(cs, cand(reconcile.PartProcessing, "o", "1"+string(rune('0'+i%10))+".00"))
	}
	cs = append(cs, cand(reconcile.PartProcessing, "needle", "7.77"))
	ex := reconcile.Explain(dec("7.77"), cs)
	if ex.Method != reconcile.MethodExact || len(ex.Parts) != 1 || ex.Parts[0].Orders[0].MerchantOrderID != "needle" {
		t.Fatalf("explanation = %+v", ex)
	}
	// No subset of amounts 10..19 makes 3.33: the bounded search gives up
	// and the greedy pass explains nothing of a smaller drift.
	ex = reconcile.Explain(dec("3.33"), cs)
	if ex.Method != reconcile.MethodNone || !ex.Unexplained.Equal(dec("3.33")) {
		t.Fatalf("explanation = %+v", ex)
	}
}
