// Command godiff is the Go side of the DRA allocator differential test (make dra-difftest): it
// runs upstream k8s.io/dynamic-resource-allocation/structured's allocator (incubating
// implementation, v1.37.1 kube-scheduler's default feature gates) on one generated case (a file
// argument, or stdin) and prints its result as one JSON line: {"results": [...], "calls": N},
// {"none": true, "calls": N} or {"error": "...", "calls": N}, calls being
// GetStats().NumAllocateOneInvocations.
// -timeout bounds the search (an error "... context deadline exceeded" when it is reached).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"reflect"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type input struct {
	Node            v1.Node                     `json:"node"`
	Slices          []resourceapi.ResourceSlice `json:"slices"`
	Classes         []resourceapi.DeviceClass   `json:"classes"`
	Claims          []resourceapi.ResourceClaim `json:"claims"`
	AllocatedClaims []resourceapi.ResourceClaim `json:"allocatedClaims"`
}

type output struct {
	Results []resourceapi.AllocationResult `json:"results"`
	Error   string                         `json:"error,omitempty"`
	Calls   int64                          `json:"calls"`
	None    bool                           `json:"none,omitempty"`
}

type lister map[string]*resourceapi.DeviceClass

func (l lister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclass"), name)
}

func (l lister) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func main() {
	timeout := flag.Duration("timeout", 10*time.Second, "how long the allocator may search")
	flag.Parse()
	var r io.Reader = os.Stdin
	if flag.NArg() > 0 {
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			panic(err)
		}
		defer f.Close()
		r = f
	}
	var in input
	if err := json.NewDecoder(r).Decode(&in); err != nil {
		panic(err)
	}
	// The gates on in a v1.37.1 kube-scheduler started without --feature-gates, as sched-dra's
	// Features::V1_37_DEFAULTS: DRAFractionalCapacityRange is beta but has MinCompatibilityVersion
	// 1.37 above the binary's default compatibility version 1.36, so it is off.
	features := structured.Features{
		AdminAccess: true, PrioritizedList: true, PartitionableDevices: true, DeviceTaints: true,
		DeviceBindingAndStatus: true, ConsumableCapacity: true, FractionalCapacityRange: false,
	}
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for i := range in.AllocatedClaims {
		c := &in.AllocatedClaims[i]
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	l := lister{}
	for i := range in.Classes {
		l[in.Classes[i].Name] = &in.Classes[i]
	}
	var slices []*resourceapi.ResourceSlice
	for i := range in.Slices {
		slices = append(slices, &in.Slices[i])
	}
	var claims []*resourceapi.ResourceClaim
	for i := range in.Claims {
		claims = append(claims, &in.Claims[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	a, err := structured.NewAllocator(ctx, features, state, l, slices, cel.NewCache(10, cel.Features{}))
	if err != nil {
		panic(err)
	}
	res, err := a.Allocate(ctx, &in.Node, claims)
	out := output{Results: res}
	out.Calls = reflect.ValueOf(a).MethodByName("GetStats").Call(nil)[0].FieldByName("NumAllocateOneInvocations").Int()
	if err != nil {
		out.Error = err.Error()
	} else if res == nil {
		out.None = true
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
