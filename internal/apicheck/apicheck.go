// Package apicheck lists the exported API of a Go module, one line per
// feature in the format of Go's own api/go1.*.txt files, for a test that
// compares it with the list checked in at api/NAME.txt, so that a name
// added to, changed in or removed from the API is a visible, reviewed
// change.
//
// The packages listed are the module's importable API: every package of
// the module except main packages, packages with an "internal" element in
// their import path and those under examples/ at the module's root (the
// demos' helpers, which make no compatibility promise). For each, as Go's
// cmd/api does: every exported const (its type, and its value), var, func
// and type; a struct's exported fields ("embedded T" for an embedded
// one); an interface's method set (or "unexported methods"); and the
// exported methods of the method sets of T and *T, promoted ones
// included. Deprecated names get an extra "//deprecated" line. Types are
// written with their package's name (time.Duration), byte and rune as
// uint8 and int32, untyped constants as ideal-int and so on, type
// parameters as $0, $1 in order. As with cmd/api, the fields promoted
// from an embedded struct are not listed (its type's own lines have them,
// when it is exported), nor is a struct type's layout inside a signature
// ("struct"). Unlike cmd/api, an interface's type terms (~int | ~string)
// are written in its summary line, a string constant's value whole, and
// an alias of a type from an internal package (type ConfigError =
// cfgerr.Error) is followed by that type's fields and methods under the
// alias's name, since users reach them through it alone.
//
// The module's own packages are type-checked from source (the GoFiles
// that go list selects for this platform); the packages they import from
// other modules and the standard library are read from the export data
// go list -export writes into the build cache. Only the standard library
// is used. Generate lists any module it is pointed at: this package's
// test checks both modules of the repository (the root and lb).
package apicheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// API is the exported surface of a module.
type API struct {
	Module   string    // the module's path
	Features []string  // sorted, one per line of the API file
	Packages []Package // the listed packages, by import path
}

// Package is what is known of one listed package.
type Package struct {
	Path     string // import path
	Dir      string // relative to the module's root, "." for the root
	Features int    // lines of the API file for this package
	// Exported is the count of shared/tools/exported.go: exported funcs,
	// methods on exported types, types, vars and consts declared in the
	// directory's non-test files, build constraints ignored; -1 when a
	// file does not parse.
	Exported int
}

// File returns the path of a module's API file, relative to the module's
// root: api/NAME.txt, NAME being the last element of the module path
// (holdfast, lb), a major version suffix (/v2) left out.
func File(module string) string {
	name := path.Base(module)
	if len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" && strings.Contains(module, "/") {
		name = path.Base(path.Dir(module))
	}
	return filepath.Join("api", name+".txt")
}

// listed reports whether a package of the module at path rel (relative to
// the module's root, "." for the root) belongs in the API file.
func listed(rel, name string) bool {
	if name == "main" {
		return false
	}
	elems := strings.Split(rel, "/")
	if elems[0] == "examples" {
		return false
	}
	return !slices.Contains(elems, "internal")
}

// listPkg is the part of go list -json read here.
type listPkg struct {
	ImportPath     string
	Name           string
	Dir            string
	Standard       bool
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string
	Imports        []string
	ImportMap      map[string]string
	Module         *struct{ Path, Dir string }
	Error          *struct{ Err string }
	Export         string
}

// goList runs go list in dir and decodes its packages.
func goList(dir string, args ...string) ([]*listPkg, error) {
	cmd := exec.Command("go", append([]string{"list", "-e", "-json=ImportPath,Name,Dir,Standard,GoFiles,CgoFiles,IgnoredGoFiles,Imports,ImportMap,Module,Error,Export"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	var pkgs []*listPkg
	for d := json.NewDecoder(bytes.NewReader(out)); ; {
		p := new(listPkg)
		if err := d.Decode(p); err == io.EOF {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("go list %s: %v", strings.Join(args, " "), err)
		}
		pkgs = append(pkgs, p)
	}
}

// Generate lists the API of the module whose root directory is root.
func Generate(root string) (*API, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	// Every package of the module and what they import, dependencies
	// first.
	all, err := goList(root, "-deps", "./...")
	if err != nil {
		return nil, err
	}
	resolved, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	api := &API{}
	own := map[string]*listPkg{} // the module's packages
	var order []*listPkg         // the same, dependencies first
	for _, p := range all {
		if p.Module == nil || (filepath.Clean(p.Module.Dir) != root && filepath.Clean(p.Module.Dir) != resolved) {
			continue
		}
		if p.Error != nil {
			return nil, fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		if len(p.CgoFiles) > 0 {
			return nil, fmt.Errorf("%s: cgo is not supported", p.ImportPath)
		}
		api.Module = p.Module.Path
		own[p.ImportPath] = p
		order = append(order, p)
	}
	if api.Module == "" {
		return nil, fmt.Errorf("no package of a module rooted at %s", root)
	}
	// The export data of everything else that they import.
	external := map[string]bool{}
	for _, p := range order {
		for _, imp := range p.Imports {
			if own[imp] == nil && imp != "unsafe" && imp != "C" {
				external[imp] = true
			}
		}
	}
	exports := map[string]string{}
	if len(external) > 0 {
		deps, err := goList(root, append([]string{"-export", "-deps"}, slices.Sorted(maps.Keys(external))...)...)
		if err != nil {
			return nil, err
		}
		for _, p := range deps {
			if p.Error != nil {
				return nil, fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err)
			}
			exports[p.ImportPath] = p.Export
		}
	}

	fset := token.NewFileSet()
	fromExport := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	checked := map[string]*types.Package{}
	dep := map[token.Pos]bool{} // the deprecated names of the module's packages
	for _, p := range order {
		files := make([]*ast.File, 0, len(p.GoFiles))
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		conf := types.Config{Importer: importerFunc(func(path string) (*types.Package, error) {
			if m, ok := p.ImportMap[path]; ok {
				path = m
			}
			if path == "unsafe" {
				return types.Unsafe, nil
			}
			if tp, ok := checked[path]; ok {
				return tp, nil
			}
			return fromExport.Import(path)
		})}
		deprecated(dep, files)
		tp, err := conf.Check(p.ImportPath, fset, files, nil)
		if err != nil {
			return nil, err
		}
		checked[p.ImportPath] = tp

		rel, err := filepath.Rel(filepath.Clean(p.Module.Dir), p.Dir)
		if err != nil {
			return nil, err
		}
		rel = filepath.ToSlash(rel)
		if len(p.GoFiles) == 0 || !listed(rel, p.Name) {
			continue
		}
		if err := platformFree(fset, p); err != nil {
			return nil, err
		}
		w := &walker{pkg: tp, deprecated: dep}
		w.export()
		api.Features = append(api.Features, w.features...)
		api.Packages = append(api.Packages, Package{
			Path:     p.ImportPath,
			Dir:      rel,
			Features: len(w.features),
			Exported: countExported(p.Dir),
		})
	}
	slices.Sort(api.Features)
	if i, ok := firstDup(api.Features); ok {
		return nil, fmt.Errorf("feature listed twice: %s", api.Features[i])
	}
	sort.Slice(api.Packages, func(i, j int) bool { return api.Packages[i].Path < api.Packages[j].Path })
	return api, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

func firstDup(s []string) (int, bool) {
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return i, true
		}
	}
	return 0, false
}

// platformFree fails when a file of the package that this platform's
// build leaves out declares an exported name: the API would then differ
// between platforms, and one file cannot say so.
func platformFree(fset *token.FileSet, p *listPkg) error {
	for _, name := range p.IgnoredGoFiles {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil || f.Name.Name != p.Name {
			continue // not this package (a //go:build ignore program, say)
		}
		if n := exportedDecls(f); n > 0 {
			return fmt.Errorf("%s: %s, left out of this platform's build, declares %d exported names: the API file cannot describe an API that differs by platform", p.ImportPath, name, n)
		}
	}
	return nil
}

// countExported counts as shared/tools/exported.go does: the exported
// funcs, methods on exported types, types, vars and consts of every
// non-test .go file of dir, whatever its build constraints; -1 when one
// does not parse.
func countExported(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	fset := token.NewFileSet()
	n := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return -1
		}
		if strings.HasSuffix(f.Name.Name, "_test") {
			continue
		}
		n += exportedDecls(f)
	}
	return n
}

// exportedDecls is exported.go's count for one file.
func exportedDecls(f *ast.File) int {
	n := 0
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv != nil && len(d.Recv.List) > 0 {
				t := d.Recv.List[0].Type
				if s, ok := t.(*ast.StarExpr); ok {
					t = s.X
				}
				if g, ok := t.(*ast.IndexExpr); ok {
					t = g.X
				}
				if id, ok := t.(*ast.Ident); ok && !id.IsExported() {
					continue
				}
			}
			n++
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						n++
					}
				case *ast.ValueSpec:
					for _, id := range s.Names {
						if id.IsExported() {
							n++
						}
					}
				}
			}
		}
	}
	return n
}

// deprecated adds to dep the positions of the names whose doc comment
// has a paragraph that starts "Deprecated: ".
func deprecated(dep map[token.Pos]bool, files []*ast.File) {
	is := func(docs ...*ast.CommentGroup) bool {
		for _, doc := range docs {
			if doc == nil {
				continue
			}
			for _, para := range strings.Split(doc.Text(), "\n\n") {
				if strings.HasPrefix(para, "Deprecated: ") {
					return true
				}
			}
		}
		return false
	}
	fields := func(l *ast.FieldList) {
		if l == nil {
			return
		}
		for _, f := range l.List {
			if !is(f.Doc) {
				continue
			}
			for _, n := range f.Names {
				dep[n.Pos()] = true
			}
			if len(f.Names) == 0 { // embedded: at its type's name, as go/types has it
				t := f.Type
				if s, ok := t.(*ast.StarExpr); ok {
					t = s.X
				}
				switch g := t.(type) {
				case *ast.IndexExpr:
					t = g.X
				case *ast.IndexListExpr:
					t = g.X
				}
				if s, ok := t.(*ast.SelectorExpr); ok {
					t = s.Sel
				}
				dep[t.Pos()] = true
			}
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if is(n.Doc) {
					dep[n.Name.Pos()] = true
				}
			case *ast.GenDecl:
				for _, s := range n.Specs {
					var parent *ast.CommentGroup
					if len(n.Specs) == 1 {
						parent = n.Doc
					}
					switch s := s.(type) {
					case *ast.TypeSpec:
						if is(s.Doc, parent) {
							dep[s.Name.Pos()] = true
						}
					case *ast.ValueSpec:
						if is(s.Doc, parent) {
							for _, id := range s.Names {
								dep[id.Pos()] = true
							}
						}
					}
				}
			case *ast.StructType:
				fields(n.Fields)
			case *ast.InterfaceType:
				fields(n.Methods)
			}
			return true
		})
	}
}

// walker writes the features of one package.
type walker struct {
	pkg        *types.Package
	deprecated map[token.Pos]bool
	scope      []string // the line's prefix: "pkg P", "type T struct"
	features   []string
}

func (w *walker) emit(format string, args ...any) {
	line := strings.Join(append(slices.Clone(w.scope), fmt.Sprintf(format, args...)), ", ")
	if strings.Contains(line, "\n") {
		panic("feature with a newline: " + line)
	}
	w.features = append(w.features, line)
}

// emitDeprecated adds "NAME //deprecated" when obj is deprecated.
func (w *walker) emitDeprecated(kind string, obj types.Object) {
	if w.isDeprecated(obj) {
		w.emit("%s //deprecated", strings.TrimPrefix(kind+" "+obj.Name(), " "))
	}
}

func (w *walker) isDeprecated(obj types.Object) bool {
	return w.deprecated[obj.Pos()]
}

func (w *walker) export() {
	w.scope = []string{"pkg " + w.pkg.Path()}
	s := w.pkg.Scope()
	for _, name := range s.Names() {
		if !token.IsExported(name) {
			continue
		}
		switch obj := s.Lookup(name).(type) {
		case *types.Const:
			w.emitDeprecated("const", obj)
			w.emit("const %s %s", name, w.typeString(obj.Type()))
			short, exact := obj.Val().String(), obj.Val().ExactString()
			if short == exact || obj.Val().Kind() == constant.String {
				w.emit("const %s = %s", name, exact)
			} else {
				w.emit("const %s = %s  // %s", name, short, exact)
			}
		case *types.Var:
			w.emitDeprecated("var", obj)
			w.emit("var %s %s", name, w.typeString(obj.Type()))
		case *types.Func:
			w.emitDeprecated("func", obj)
			w.emit("func %s%s", name, w.signature(obj.Signature()))
		case *types.TypeName:
			w.emitType(obj)
		}
	}
}

func (w *walker) emitType(obj *types.TypeName) {
	name := obj.Name()
	w.emitDeprecated("type", obj)
	if obj.IsAlias() {
		w.emit("type %s = %s", name, w.typeString(obj.Type()))
		// An alias of a type that users cannot name otherwise (from an
		// internal package) makes its fields and methods part of this
		// package's API: list them under the alias's name.
		if named, ok := types.Unalias(obj.Type()).(*types.Named); ok && named.Obj().Pkg() != nil &&
			slices.Contains(strings.Split(named.Obj().Pkg().Path(), "/"), "internal") {
			w.emitNamed(name, name, named)
		}
		return
	}
	named := obj.Type().(*types.Named)
	recv := name
	if tps := named.TypeParams(); tps != nil {
		name += w.typeParams(tps, true)
		recv += w.typeParams(tps, false)
	}
	w.emitNamed(name, recv, named)
}

// emitNamed lists a defined type's underlying type and methods, the type
// being called name (with its type parameters' constraints) and recv in
// the methods' receivers.
func (w *walker) emitNamed(name, recv string, named *types.Named) {
	switch u := named.Underlying().(type) {
	case *types.Struct:
		head := "type " + name + " struct"
		w.emit("%s", head)
		w.scope = append(w.scope, head)
		for i := range u.NumFields() {
			f := u.Field(i)
			if !f.Exported() {
				continue
			}
			if f.Embedded() {
				if w.isDeprecated(f) {
					w.emit("embedded %s //deprecated", w.typeString(f.Type()))
				}
				w.emit("embedded %s", w.typeString(f.Type()))
				continue
			}
			w.emitDeprecated("", f)
			w.emit("%s %s", f.Name(), w.typeString(f.Type()))
		}
		w.scope = w.scope[:len(w.scope)-1]
	case *types.Interface:
		w.emitInterface(name, u)
		return // its methods are listed with it
	default:
		w.emit("type %s %s", name, w.typeString(u))
	}
	// The method sets of T and *T: T's first, then the methods only *T
	// has.
	seen := map[string]bool{}
	for _, t := range []types.Type{named, types.NewPointer(named)} {
		ms := types.NewMethodSet(t)
		for i := range ms.Len() {
			m := ms.At(i)
			if !m.Obj().Exported() || seen[m.Obj().Name()] {
				continue
			}
			seen[m.Obj().Name()] = true
			w.emitMethod(recv, m)
		}
	}
}

func (w *walker) emitMethod(recv string, m *types.Selection) {
	sig := m.Type().(*types.Signature)
	if _, ok := m.Recv().(*types.Pointer); ok {
		recv = "*" + recv
	}
	if w.isDeprecated(m.Obj()) {
		w.emit("method (%s) %s //deprecated", recv, m.Obj().Name())
	}
	w.emit("method (%s) %s%s", recv, m.Obj().Name(), w.signature(sig))
}

func (w *walker) emitInterface(name string, t *types.Interface) {
	head := "type " + name + " interface"
	w.scope = append(w.scope, head)
	var names []string
	complete := true
	ms := types.NewMethodSet(t)
	for i := range ms.Len() {
		m := ms.At(i).Obj().(*types.Func)
		if !m.Exported() {
			complete = false
			continue
		}
		names = append(names, m.Name())
		w.emitDeprecated("", m)
		w.emit("%s%s", m.Name(), w.signature(m.Signature()))
	}
	if !complete {
		// Only the package can implement it, so it may gain
		// methods: say so rather than list its method set.
		w.emit("unexported methods")
	}
	w.scope = w.scope[:len(w.scope)-1]
	if !complete {
		return
	}
	slices.Sort(names)
	names = append(names, w.typeTerms(t)...)
	if len(names) == 0 {
		w.emit("%s {}", head)
		return
	}
	w.emit("%s { %s }", head, strings.Join(names, ", "))
}

// typeTerms returns the type sets an interface embeds (~int | ~string),
// sorted, from embedded interfaces too.
func (w *walker) typeTerms(t *types.Interface) []string {
	var list []string
	for i := range t.NumEmbeddeds() {
		switch e := types.Unalias(t.EmbeddedType(i)).(type) {
		case *types.Union:
			terms := make([]string, e.Len())
			for j := range e.Len() {
				terms[j] = w.typeString(e.Term(j).Type())
				if e.Term(j).Tilde() {
					terms[j] = "~" + terms[j]
				}
			}
			list = append(list, strings.Join(terms, " | "))
		case *types.Named:
			if it, ok := e.Underlying().(*types.Interface); ok {
				list = append(list, w.typeTerms(it)...)
			} else {
				list = append(list, w.typeString(e))
			}
		case *types.Interface:
			list = append(list, w.typeTerms(e)...)
		default:
			list = append(list, w.typeString(e))
		}
	}
	slices.Sort(list)
	return list
}

func (w *walker) typeString(t types.Type) string {
	var b strings.Builder
	w.writeType(&b, t)
	return b.String()
}

func (w *walker) signature(sig *types.Signature) string {
	var b strings.Builder
	w.writeSignature(&b, sig)
	return b.String()
}

func (w *walker) typeParams(l *types.TypeParamList, constraints bool) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range l.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		w.writeType(&b, l.At(i))
		if constraints {
			b.WriteByte(' ')
			w.writeType(&b, l.At(i).Constraint())
		}
	}
	b.WriteByte(']')
	return b.String()
}

var ideal = map[types.BasicKind]string{
	types.UntypedBool:    "ideal-bool",
	types.UntypedInt:     "ideal-int",
	types.UntypedRune:    "ideal-char",
	types.UntypedFloat:   "ideal-float",
	types.UntypedComplex: "ideal-complex",
	types.UntypedString:  "ideal-string",
	types.UnsafePointer:  "unsafe.Pointer",
}

func (w *walker) writeType(b *strings.Builder, t types.Type) {
	switch t := t.(type) {
	case *types.Basic:
		if s, ok := ideal[t.Kind()]; ok {
			b.WriteString(s)
			return
		}
		switch t.Kind() {
		case types.Byte:
			b.WriteString("uint8")
		case types.Rune:
			b.WriteString("int32")
		default:
			b.WriteString(t.Name())
		}
	case *types.Array:
		fmt.Fprintf(b, "[%d]", t.Len())
		w.writeType(b, t.Elem())
	case *types.Slice:
		b.WriteString("[]")
		w.writeType(b, t.Elem())
	case *types.Struct:
		b.WriteString("struct")
	case *types.Pointer:
		b.WriteByte('*')
		w.writeType(b, t.Elem())
	case *types.Signature:
		b.WriteString("func")
		w.writeSignature(b, t)
	case *types.Interface:
		var names []string
		for i := range t.NumExplicitMethods() {
			names = append(names, t.ExplicitMethod(i).Name())
		}
		for i := range t.NumEmbeddeds() {
			if e, ok := types.Unalias(t.EmbeddedType(i)).(*types.Interface); ok {
				for j := range e.NumMethods() {
					names = append(names, e.Method(j).Name())
				}
			}
		}
		slices.Sort(names)
		names = append(names, w.typeTerms(t)...)
		if len(names) == 0 {
			b.WriteString("interface{}")
		} else {
			b.WriteString("interface{ " + strings.Join(names, ", ") + " }")
		}
	case *types.Map:
		b.WriteString("map[")
		w.writeType(b, t.Key())
		b.WriteByte(']')
		w.writeType(b, t.Elem())
	case *types.Chan:
		switch t.Dir() {
		case types.SendOnly:
			b.WriteString("chan<- ")
		case types.RecvOnly:
			b.WriteString("<-chan ")
		default:
			b.WriteString("chan ")
		}
		w.writeType(b, t.Elem())
	case *types.Alias:
		w.writeType(b, types.Unalias(t))
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil && p != w.pkg {
			b.WriteString(p.Name() + ".")
		}
		b.WriteString(t.Obj().Name())
		if args := t.TypeArgs(); args.Len() > 0 {
			b.WriteByte('[')
			for i := range args.Len() {
				if i > 0 {
					b.WriteString(", ")
				}
				w.writeType(b, args.At(i))
			}
			b.WriteByte(']')
		}
	case *types.TypeParam:
		fmt.Fprintf(b, "$%d", t.Index())
	case *types.Union:
		b.WriteString(strings.Join(w.typeTerms(types.NewInterfaceType(nil, []types.Type{t})), ", "))
	default:
		panic(fmt.Sprintf("apicheck: type %T", t))
	}
}

func (w *walker) writeSignature(b *strings.Builder, sig *types.Signature) {
	if tps := sig.TypeParams(); tps != nil {
		b.WriteString(w.typeParams(tps, true))
	}
	w.writeTuple(b, sig.Params(), sig.Variadic())
	switch r := sig.Results(); r.Len() {
	case 0:
	case 1:
		b.WriteByte(' ')
		w.writeType(b, r.At(0).Type())
	default:
		b.WriteByte(' ')
		w.writeTuple(b, r, false)
	}
}

func (w *walker) writeTuple(b *strings.Builder, t *types.Tuple, variadic bool) {
	b.WriteByte('(')
	for i := range t.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		typ := t.At(i).Type()
		if variadic && i == t.Len()-1 {
			b.WriteString("...")
			typ = typ.(*types.Slice).Elem()
		}
		w.writeType(b, typ)
	}
	b.WriteByte(')')
}

// Diff returns the lines of got that want lacks (added) and those of want
// that got lacks (removed); both are sorted.
func Diff(got, want []string) (added, removed []string) {
	in := func(s []string) map[string]bool {
		m := make(map[string]bool, len(s))
		for _, l := range s {
			m[l] = true
		}
		return m
	}
	g, h := in(got), in(want)
	for _, l := range got {
		if !h[l] {
			added = append(added, l)
		}
	}
	for _, l := range want {
		if !g[l] {
			removed = append(removed, l)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

// Header is the comment at the top of an API file.
func Header(module string) string {
	return "# The exported API of " + module + ", one line per feature in the format of Go's api/go1.*.txt.\n" +
		"# Generated, not edited: a test (internal/apicheck) fails when the code differs from it.\n" +
		"# To accept a change, run in the module's root: go test ./internal/apicheck -update\n"
}

// Format returns the content of the API file.
func (a *API) Format() []byte {
	var b bytes.Buffer
	b.WriteString(Header(a.Module))
	for _, f := range a.Features {
		b.WriteString(f)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Parse returns the features of an API file: its lines but blank ones and
// # comments.
func Parse(data []byte) ([]string, error) {
	if bytes.Contains(data, []byte("\r")) {
		return nil, errors.New("carriage return in the API file")
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out, nil
}
