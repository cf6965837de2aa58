// Command featuregates prints every feature gate a kube-scheduler binary accepts in --feature-gates,
// as the binary computes it at its default compatibility version: one tab-separated line per gate,
// sorted by name, "name default stage locked dependencies" (the
// dependencies in the order upstream declares them, which is the order its error message lists them).
//
// It imports kube-scheduler's app package, so the process-wide gate registry is filled by exactly
// the init functions the real binary runs (pkg/features with client-go's and zpages' gates, the
// generic API server's, component-base logs and metrics). ../feature-gates.sh builds it against each
// release's module (go run -modfile=releases/v1.3X/go.mod) and writes core/src/features/gates/.
//
// Written against component-base v0.33 to v0.37: the fields and methods that only later releases
// have (MinCompatibilityVersion, Dependencies) are read by reflection and interface assertion.
package main

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-base/featuregate"

	// The same init functions as the kube-scheduler binary.
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

type versioned interface {
	GetAllVersioned() map[featuregate.Feature]featuregate.VersionedSpecs
	EmulationVersion() *version.Version
}

type withDependencies interface {
	Dependencies() map[featuregate.Feature][]featuregate.Feature
}

// minCompatibility is the spec's MinCompatibilityVersion (component-base v0.35+), or nil.
func minCompatibility(spec featuregate.FeatureSpec) *version.Version {
	field := reflect.ValueOf(spec).FieldByName("MinCompatibilityVersion")
	if !field.IsValid() || field.IsNil() {
		return nil
	}
	return field.Interface().(*version.Version)
}

// atDefault is component-base's featureSpecAtEmulationAndMinCompatVersion (v0.35+; before it the
// min compatibility version did not exist, and no spec names one).
func atDefault(specs featuregate.VersionedSpecs, emulation, minCompat *version.Version) featuregate.FeatureSpec {
	for i := len(specs) - 1; i >= 0; i-- {
		if specs[i].Version.GreaterThan(emulation) {
			continue
		}
		if min := minCompatibility(specs[i]); min != nil && !minCompat.AtLeast(min) {
			continue
		}
		return specs[i]
	}
	return featuregate.FeatureSpec{Default: false, PreRelease: featuregate.PreAlpha}
}

// stage names the spec's stage as kube-scheduler's help does; GA is the empty string upstream.
func stage(spec featuregate.FeatureSpec) string {
	if spec.PreRelease == featuregate.GA {
		return "GA"
	}
	return fmt.Sprint(spec.PreRelease)
}

func main() {
	gate := utilfeature.DefaultMutableFeatureGate.(versioned)
	emulation := version.MajorMinor(gate.EmulationVersion().Major(), gate.EmulationVersion().Minor())
	// The binary's default: the component's min compatibility version is its minor - 1.
	minCompat := emulation.SubtractMinor(1)
	deps := map[featuregate.Feature][]featuregate.Feature{}
	if d, ok := utilfeature.DefaultMutableFeatureGate.(withDependencies); ok {
		deps = d.Dependencies()
	}
	all := gate.GetAllVersioned()
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, string(name))
	}
	sort.Strings(names)
	fmt.Printf("# emulation %s, min compatibility %s\n", emulation, minCompat)
	for _, name := range names {
		spec := atDefault(all[featuregate.Feature(name)], emulation, minCompat)
		var on []string
		for _, dep := range deps[featuregate.Feature(name)] {
			on = append(on, string(dep))
		}
		fmt.Printf("%s\t%t\t%s\t%t\t%s\n", name, spec.Default, stage(spec), spec.LockToDefault, strings.Join(on, ","))
	}
}
