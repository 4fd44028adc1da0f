package readiness

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"reflect"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// docDefaults returns the rows "field default" of the table in the doc of
// type name in file: the defaults as the doc says them.
func docDefaults(t *testing.T, file, name string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(gotoken.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\t([A-Z]\w*) +(\S+)`)
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != gotoken.TYPE || g.Doc == nil || g.Specs[0].(*ast.TypeSpec).Name.Name != name {
			continue
		}
		rows := map[string]string{}
		for _, m := range row.FindAllStringSubmatch(g.Doc.Text(), -1) {
			rows[m[1]] = m[2]
		}
		return rows
	}
	t.Fatalf("no type %s in %s", name, file)
	return nil
}

// The tables of defaults in the docs of Config and ServeConfig are what
// the zero values become.
func TestDocDefaults(t *testing.T) {
	cfg, err := Config{}.validate()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ServeConfig{}.validate()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		file, typ string
		v         any
		fields    []string // the rows with a value to compare
	}{
		{"checker.go", "Config", cfg, []string{"CheckInterval", "CheckTimeout", "ProbeTimeout", "FailureThreshold", "NotReadyAfter", "DrainInterval", "DrainTimeout"}},
		{"serve.go", "ServeConfig", sc, []string{"DrainTimeout", "ShutdownDelay", "ShutdownTimeout"}},
	} {
		rows := docDefaults(t, tt.file, tt.typ)
		v := reflect.ValueOf(tt.v)
		for _, field := range tt.fields {
			doc, ok := rows[field]
			if !ok {
				t.Errorf("%s's doc lists no default of %s", tt.typ, field)
				continue
			}
			var got string
			switch x := v.FieldByName(field).Interface().(type) {
			case time.Duration:
				d, err := time.ParseDuration(doc)
				if err != nil {
					t.Errorf("%s.%s: the doc's default %q is not a duration", tt.typ, field, doc)
					continue
				}
				if d != x {
					got = x.String()
				}
			case int:
				if doc != strconv.Itoa(x) {
					got = strconv.Itoa(x)
				}
			}
			if got != "" {
				t.Errorf("%s.%s defaults to %s; its doc says %s", tt.typ, field, got, doc)
			}
		}
	}
}
