package chartgen

import (
	"fmt"
	"reflect"
	"strings"
)

// A feature is one choice of a chart: the rendering with it, the
// rendering without it it is compared to, and the template condition that
// selects it. The first feature of a chart has no base: it is what the
// chart installs whatever the values.
type feature struct {
	// file is the template, under templates/, that holds the objects the
	// choice adds.
	file string
	// cond is the condition of an `if` action over the chart's values.
	cond        string
	build, base Build
	hasBase     bool
}

// A field is what a user sets: a field of some objects that every
// rendering holds as a value marker, emitted as a template expression.
type field struct {
	kind, name string
	// path leads to the field: map keys, or "*" for every item of a list.
	path []string
	// value names the marker.
	value string
	// record is set where the rendering's value is the chart's default,
	// which values.yaml then holds; every rendering must agree on it.
	record bool
}

// A value is how a chart emits a value marker.
type value struct {
	// expr is the template text that replaces the marker: on the line,
	// or, for a block, the pipeline whose YAML is indented under the key.
	expr  string
	block bool
}

// chart is a chart being generated: its objects as trees with markers,
// and the template files they go to.
type chart struct {
	deployDir string
	fields    []field
	values    map[string]value
	// conds are the features' conditions, numbered as merge's markers
	// number them.
	conds []string
	files []*file
	// byID holds each object of the chart by ID, and how many templates
	// hold an object of that ID (alternatives of one choice may each add
	// it).
	byID  map[string]*Object
	count map[string]int
	// defaults are the values the renderings hold where the markers
	// stand, by the marker's name.
	defaults map[string]any
	cache    map[string][]Object
}

type file struct {
	name string
	cond int // -1 for none
	objs []*Object
}

func newChart(deployDir string, fields []field, values map[string]value) *chart {
	return &chart{
		deployDir: deployDir, fields: fields, values: values,
		byID: map[string]*Object{}, count: map[string]int{},
		defaults: map[string]any{}, cache: map[string][]Object{},
	}
}

// render returns b's rendering with every field replaced by its marker
// and the Namespace left out. Renderings are cached: features share them.
func (c *chart) render(b Build) ([]Object, error) {
	key := fmt.Sprintf("%#v", b)
	if objs, ok := c.cache[key]; ok {
		return objs, nil
	}
	objs, err := Render(c.deployDir, b)
	if err != nil {
		return nil, err
	}
	var out []Object
	for _, o := range objs {
		if o["kind"] == "Namespace" {
			continue
		}
		for _, f := range c.fields {
			md, _ := o["metadata"].(map[string]any)
			if o["kind"] == f.kind && md["name"] == f.name {
				if err := c.mark(o, f.path, f); err != nil {
					return nil, fmt.Errorf("chartgen: %s %s: %w", f.kind, f.name, err)
				}
			}
		}
		out = append(out, o)
	}
	c.cache[key] = out
	return out, nil
}

// mark replaces what path leads to in v, where it exists, by f's marker,
// and records the value it held if f says so.
func (c *chart) mark(v any, path []string, f field) error {
	name := f.value
	if len(path) == 1 {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		old, ok := m[path[0]]
		if !ok {
			return nil
		}
		if s, ok := old.(string); ok && strings.HasPrefix(s, valueMark) {
			return nil
		}
		if f.record {
			if d, ok := c.defaults[name]; ok && !reflect.DeepEqual(d, old) {
				return fmt.Errorf("%s is %v in one rendering and %v in another: one default cannot stand for both", name, d, old)
			}
			c.defaults[name] = old
		}
		m[path[0]] = valueMark + name
		return nil
	}
	switch v := v.(type) {
	case map[string]any:
		if next, ok := v[path[0]]; ok {
			return c.mark(next, path[1:], f)
		}
	case []any:
		for i, item := range v {
			if path[0] == "*" || path[0] == fmt.Sprint(i) {
				if err := c.mark(item, path[1:], f); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// add merges feature f into the chart.
func (c *chart) add(f feature) error {
	with, err := c.render(f.build)
	if err != nil {
		return err
	}
	cond := -1
	if f.cond != "" {
		cond = len(c.conds)
		c.conds = append(c.conds, f.cond)
	}
	out := &file{name: f.file, cond: cond}
	c.files = append(c.files, out)
	baseByID := map[string]Object{}
	if f.hasBase {
		base, err := c.render(f.base)
		if err != nil {
			return err
		}
		for _, o := range base {
			baseByID[ID(o)] = o
		}
	}
	seen := map[string]bool{}
	for _, o := range with {
		id := ID(o)
		seen[id] = true
		b, ok := baseByID[id]
		if !ok {
			t := deepCopy(o).(Object)
			out.objs = append(out.objs, &t)
			if c.count[id] == 0 {
				c.byID[id] = &t
			}
			c.count[id]++
			continue
		}
		if c.count[id] != 1 {
			return fmt.Errorf("chartgen: %s: %s changes %s, which %d templates hold", f.file, f.build.Dir, id, c.count[id])
		}
		t := c.byID[id]
		nt, err := merge(*t, b, o, cond, id)
		if err != nil {
			return fmt.Errorf("%w (choice %s)", err, f.file)
		}
		*t = nt.(Object)
	}
	for id := range baseByID {
		if !seen[id] {
			return fmt.Errorf("chartgen: %s: the choice removes %s, which a chart cannot template", f.file, id)
		}
	}
	return nil
}

// annotate adds an annotation to every object of kind in the chart: what
// only the chart needs, such as Helm's resource policy.
func (c *chart) annotate(kind, key, val string) {
	for _, f := range c.files {
		for _, t := range f.objs {
			if (*t)["kind"] != kind {
				continue
			}
			md := (*t)["metadata"].(map[string]any)
			ann, _ := md["annotations"].(map[string]any)
			if ann == nil {
				ann = map[string]any{}
				md["annotations"] = ann
			}
			ann[key] = val
		}
	}
}
