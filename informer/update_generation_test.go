package informer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-go/converge/informer"
	"github.com/converge-go/converge/informer/memstore"
	"github.com/converge-go/converge/internal/must"
	"github.com/converge-go/converge/object"
)

// app is a value whose spec the helpers can tell from its status: they keep
// its Generation.
type app struct {
	object.Meta
	Spec   appSpec
	Status string
}

type appSpec struct {
	Replicas int
	Images   []string
}

func (a *app) ObjectSpec() any { return a.Spec }

var _ object.SpecObject = (*app)(nil)

func getApp(t *testing.T, s *memstore.Store[string, app], key string) app {
	t.Helper()
	v, _, ok, err := s.Get(t.Context(), key)
	require.NoError(t, err)
	require.True(t, ok)
	return v
}

func TestCreateOrUpdateShouldCreateASpecObjectAtGenerationOne(t *testing.T) {
	s := must.Do(memstore.New[string, app]())
	_, op, err := informer.CreateOrUpdate(t.Context(), s, "a", func(a *app) error {
		a.Spec.Replicas = 3
		a.Generation = 7 // the helper's to keep, not mutate's
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, informer.Created, op)
	assert.EqualValues(t, 1, getApp(t, s, "a").Generation)
}

func TestUpdateShouldBumpTheGenerationOfASpecObjectOnlyWhenItsSpecChanges(t *testing.T) {
	s := must.Do(memstore.New[string, app]())
	s.Put("a", app{Meta: object.Meta{Generation: 4}, Spec: appSpec{Replicas: 1, Images: []string{"x"}}})
	for _, tc := range []struct {
		name   string
		mutate func(*app)
		op     informer.Op
		gen    int64
	}{
		{"spec field", func(a *app) { a.Spec.Replicas = 2 }, informer.Updated, 5},
		{"spec slice replaced", func(a *app) { a.Spec.Images = []string{"x", "y"} }, informer.Updated, 6},
		{"status only", func(a *app) { a.Status = "ready" }, informer.Updated, 6},
		{"finalizer only", func(a *app) { a.AddFinalizer("f") }, informer.Updated, 6},
		{"generation only", func(a *app) { a.Generation = 100 }, informer.Unchanged, 6},
		{"spec and a generation of mutate's", func(a *app) { a.Spec.Replicas = 3; a.Generation = 100 }, informer.Updated, 7},
		{"spec set to what it was", func(a *app) { a.Spec.Images = []string{"x", "y"} }, informer.Unchanged, 7},
	} {
		_, op, err := informer.Update(t.Context(), s, "a", func(a *app) error { tc.mutate(a); return nil })
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.op, op, tc.name)
		assert.Equal(t, tc.gen, getApp(t, s, "a").Generation, tc.name)
	}
}

func TestUpdateShouldBumpTheGenerationFromTheValueReadAgainAfterAConflict(t *testing.T) {
	s := newHooked[app]()
	s.Put("a", app{Meta: object.Meta{Generation: 1}})
	s.before = func(string) {
		s.before = nil // once: another spec writer gets there first
		s.Put("a", app{Meta: object.Meta{Generation: 2}, Spec: appSpec{Replicas: 5}})
	}
	_, op, err := informer.Update(t.Context(), s, "a", func(a *app) error { a.Spec.Images = []string{"z"}; return nil })
	require.NoError(t, err)
	require.Equal(t, informer.Updated, op)
	v, _, _, err := s.Get(t.Context(), "a")
	require.NoError(t, err)
	assert.EqualValues(t, 3, v.Generation)
	assert.Equal(t, appSpec{Replicas: 5, Images: []string{"z"}}, v.Spec)
}

func TestRequestDeleteShouldBumpTheGenerationOfASpecObjectItMarks(t *testing.T) {
	s := must.Do(memstore.New[string, app]())
	s.Put("a", app{Meta: object.Meta{Generation: 2, Finalizers: []string{"f"}}})
	_, op, err := informer.RequestDelete(t.Context(), s, "a")
	require.NoError(t, err)
	require.Equal(t, informer.Updated, op)
	assert.EqualValues(t, 3, getApp(t, s, "a").Generation)

	_, op, err = informer.RequestDelete(t.Context(), s, "a")
	require.NoError(t, err)
	assert.Equal(t, informer.Unchanged, op)
	assert.EqualValues(t, 3, getApp(t, s, "a").Generation, "a second request changes nothing")
}

func TestTheHelpersShouldKeepTheGenerationOfAPointerSpecObject(t *testing.T) {
	s := must.Do(memstore.New[string, *app]())
	_, _, err := informer.CreateOrUpdate(t.Context(), s, "a", func(a **app) error {
		*a = &app{Spec: appSpec{Replicas: 1}}
		return nil
	})
	require.NoError(t, err)
	_, _, err = informer.Update(t.Context(), s, "a", func(a **app) error { (*a).Spec.Replicas = 2; return nil })
	require.NoError(t, err)
	v, _, _, err := s.Get(t.Context(), "a")
	require.NoError(t, err)
	assert.EqualValues(t, 2, v.Generation)
}

func TestTheHelpersShouldLeaveTheGenerationOfAValueWithoutASpecAsMutateSetsIt(t *testing.T) {
	s := must.Do(memstore.New[string, widget]())
	_, _, err := informer.CreateOrUpdate(t.Context(), s, "w", func(w *widget) error { w.Size = 1; return nil })
	require.NoError(t, err)
	_, _, err = informer.Update(t.Context(), s, "w", func(w *widget) error { w.Size = 2; return nil })
	require.NoError(t, err)
	v, _, _, err := s.Get(t.Context(), "w")
	require.NoError(t, err)
	assert.Zero(t, v.Generation, "widget does not say what its spec is")
}
