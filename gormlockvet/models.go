package gormlockvet

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"
	"gorm.io/gorm/schema"
)

// Versioned models.
//
// A model is versioned exactly when repository.New accepts its version
// field (repository/model.go, versionField), read here from the Go types
// instead of GORM's reflection: GORM's fields in GORM's order (exported
// fields, embedded structs flattened, `gorm:"embedded"` too, with their
// embeddedPrefix), the one tagged `gormlock:"version"`, or else the one
// named Version; it must have a column, an int64 kind (int on a 64-bit
// platform), not be part of the primary key, and be readable and
// writable. models.Model, models.Versioned and models.Versioning are such
// structs, so a model that embeds one is versioned by the same rule.

// model is what the analyzer knows of one versioned model.
type model struct {
	name     string // the type's name as the package qualifies it: app.Token
	typ      *types.Named
	table    string // "" when a TableName method returns something not constant
	verField string // the version field's Go name
	verCol   string // its column
	pkCols   []string
	fields   map[string]string // column -> Go field name; nil for a model of another package
}

// models is the result of modelsAnalyzer: the versioned models of a
// package and of everything it imports.
type models struct {
	cfg   *config
	sizes types.Sizes
	pass  *analysis.Pass
	cache map[*types.Named]*model
	// tables maps a table to the versioned models on it, of this package
	// and of the packages it imports.
	tables map[string][]*model
	// tableNames holds the constant TableName methods of this package.
	tableNames map[*types.Func]string
	parsed     map[string]*ast.File // source files of other packages, by name
}

// modelsAnalyzer finds the versioned models of a package and of the
// packages it imports. It uses no facts, so that go vet and the command
// analyze only the packages named, from the export data of the others: a
// TableName method of another package is read from its source file.
var modelsAnalyzer = &analysis.Analyzer{
	Name:       "gormlockmodels",
	Doc:        "finds the versioned GORM models of a package for gormlockvet",
	Run:        runModels,
	ResultType: reflect.TypeFor[*models](),
}

func runModels(pass *analysis.Pass) (any, error) {
	m := &models{cfg: cfgOf(pass), sizes: pass.TypesSizes, pass: pass, cache: map[*types.Named]*model{}, tables: map[string][]*model{},
		tableNames: map[*types.Func]string{}, parsed: map[string]*ast.File{}}
	for _, f := range pass.Files {
		m.tableMethods(pass.TypesInfo, f)
	}
	seen := map[*types.Package]bool{}
	var visit func(pkg *types.Package)
	visit = func(pkg *types.Package) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		for _, imp := range pkg.Imports() {
			visit(imp)
		}
		if isStd(pkg) || isLibrary(pkg.Path()) || pkg.Path() == "gorm.io/gorm" || strings.HasPrefix(pkg.Path(), "gorm.io/") {
			return
		}
		for _, name := range pkg.Scope().Names() {
			tn, ok := pkg.Scope().Lookup(name).(*types.TypeName)
			if !ok || tn.IsAlias() {
				continue
			}
			named, ok := tn.Type().(*types.Named)
			if !ok || named.TypeParams().Len() > 0 {
				continue
			}
			if mod := m.of(named); mod != nil && mod.table != "" {
				m.tables[mod.table] = append(m.tables[mod.table], mod)
			}
		}
	}
	visit(pass.Pkg)
	for t := range m.tables {
		sort.Slice(m.tables[t], func(i, j int) bool { return m.tables[t][i].name < m.tables[t][j].name })
	}
	return m, nil
}

// tableMethods records the TableName methods of a file that return a
// constant.
func (m *models) tableMethods(info *types.Info, f *ast.File) {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || fd.Name.Name != "TableName" || fd.Body == nil {
			continue
		}
		if t, ok := constantReturn(info, fd); ok {
			if obj, ok := info.Defs[fd.Name].(*types.Func); ok {
				m.tableNames[obj] = t
			}
		}
	}
}

// foreignTableName returns the constant a TableName method of another
// package returns, read from its source file: a string literal, or a
// constant of its package.
func (m *models) foreignTableName(fn *types.Func) (string, bool) {
	pos := m.pass.Fset.Position(fn.Pos())
	if pos.Filename == "" || fn.Pkg() == nil {
		return "", false
	}
	f, ok := m.parsed[pos.Filename]
	if !ok {
		src, err := os.ReadFile(pos.Filename)
		if err == nil {
			f, _ = parser.ParseFile(token.NewFileSet(), pos.Filename, src, parser.SkipObjectResolution)
		}
		m.parsed[pos.Filename] = f
	}
	if f == nil {
		return "", false
	}
	recv := fn.Signature().Recv()
	if recv == nil {
		return "", false
	}
	rt := recv.Type()
	if p, ok := rt.(*types.Pointer); ok {
		rt = p.Elem()
	}
	named, ok := types.Unalias(rt).(*types.Named)
	if !ok {
		return "", false
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 || fd.Name.Name != "TableName" || fd.Body == nil || recvTypeName(fd.Recv.List[0].Type) != named.Obj().Name() {
			continue
		}
		var val string
		n := 0
		okAll := true
		ast.Inspect(fd.Body, func(node ast.Node) bool {
			switch node := node.(type) {
			case *ast.FuncLit:
				return false
			case *ast.ReturnStmt:
				s, ok := "", len(node.Results) == 1
				if ok {
					s, ok = constantOf(node.Results[0], fn.Pkg())
				}
				if !ok || n > 0 && s != val {
					okAll = false
				}
				val, n = s, n+1
			}
			return true
		})
		return val, okAll && n > 0
	}
	return "", false
}

// constantOf returns the value of a string literal, or of a constant of pkg
// named by an identifier.
func constantOf(e ast.Expr, pkg *types.Package) (string, bool) {
	switch e := ast.Unparen(e).(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		}
	case *ast.Ident:
		if c, ok := pkg.Scope().Lookup(e.Name).(*types.Const); ok && c.Val().Kind() == constant.String {
			return constant.StringVal(c.Val()), true
		}
	}
	return "", false
}

func recvTypeName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// constantReturn returns the string every return statement of fd gives,
// when it is one constant.
func constantReturn(info *types.Info, fd *ast.FuncDecl) (string, bool) {
	var val string
	n, ok := 0, true
	ast.Inspect(fd.Body, func(node ast.Node) bool {
		switch node := node.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			if len(node.Results) != 1 {
				ok = false
				return false
			}
			tv, found := info.Types[node.Results[0]]
			if !found || tv.Value == nil || tv.Value.Kind() != constant.String {
				ok = false
				return false
			}
			s := constant.StringVal(tv.Value)
			if n > 0 && s != val {
				ok = false
			}
			val, n = s, n+1
		}
		return true
	})
	return val, ok && n > 0
}

// lookup returns the versioned model t is, or holds (a pointer, a slice, an
// array or a map of it, at any depth), or nil.
func (m *models) lookup(t types.Type) *model {
	for range 8 {
		switch u := types.Unalias(t).(type) {
		case *types.Pointer:
			t = u.Elem()
			continue
		case *types.Slice:
			t = u.Elem()
			continue
		case *types.Array:
			t = u.Elem()
			continue
		case *types.Named:
			if _, ok := u.Underlying().(*types.Struct); ok {
				return m.of(u)
			}
			switch u.Underlying().(type) {
			case *types.Slice, *types.Array, *types.Pointer:
				t = u.Underlying()
				continue
			}
		}
		return nil
	}
	return nil
}

// of returns the versioned model named is, or nil when it is not one.
func (m *models) of(named *types.Named) *model {
	if mod, ok := m.cache[named]; ok {
		return mod
	}
	m.cache[named] = nil // a model that holds itself is not versioned through itself
	st, ok := named.Underlying().(*types.Struct)
	if !ok {
		return nil
	}
	fields := m.flatten(st, "", 0, map[*types.Struct]bool{})
	if named.Obj().Pkg() != nil && isLibrary(named.Obj().Pkg().Path()) && named.Obj().Pkg().Path() != gormlockModule+"/models" {
		return nil // gormlock's own records (leases, operation keys) are not the application's models
	}
	ver := versionField(fields)
	if ver == nil || !m.isInt64(ver.typ) || ver.primaryKey || !ver.creatable || !ver.updatable || !ver.readable {
		return nil
	}
	mod := &model{
		name:     qualifiedName(named.Obj().Pkg(), named.Obj().Name()),
		typ:      named,
		verField: ver.name,
		verCol:   ver.column,
		fields:   map[string]string{},
	}
	for _, f := range fields {
		if f.primaryKey || (f.name == "ID" && f.column != "") {
			mod.pkCols = append(mod.pkCols, f.column)
		}
		if f.column != "" {
			mod.fields[f.column] = f.name
		}
	}
	mod.table = m.tableOf(named)
	m.cache[named] = mod
	return mod
}

// tableOf returns the table GORM gives the model: its TableName method's
// constant, or the naming strategy's name of the type; "" when TableName
// returns something else.
func (m *models) tableOf(named *types.Named) string {
	obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(named), true, named.Obj().Pkg(), "TableName")
	if fn, ok := obj.(*types.Func); ok {
		fn = fn.Origin()
		if t, ok := m.tableNames[fn]; ok {
			return t
		}
		if fn.Pkg() != m.pass.Pkg {
			if t, ok := m.foreignTableName(fn); ok {
				return t
			}
		}
		return ""
	}
	return m.cfg.naming().TableName(named.Obj().Name())
}

// field is one of GORM's fields of a model, as versionField needs it.
type field struct {
	name, column                               string
	typ                                        types.Type
	depth                                      int // how many embedded structs hold it
	gormlockTag                                string
	hasGormlockTag                             bool
	primaryKey, creatable, updatable, readable bool
}

// flatten lists GORM's fields of st in GORM's order: exported fields, the
// fields of embedded structs in place of the struct.
func (m *models) flatten(st *types.Struct, prefix string, depth int, seen map[*types.Struct]bool) []field {
	if seen[st] || depth > 8 {
		return nil
	}
	seen[st] = true
	defer delete(seen, st)
	var out []field
	for i := range st.NumFields() {
		v := st.Field(i)
		if !token.IsExported(v.Name()) {
			continue
		}
		tag := reflect.StructTag(st.Tag(i))
		settings := schema.ParseTagSetting(tag.Get("gorm"), ";")
		f := field{name: v.Name(), typ: v.Type(), depth: depth, creatable: true, updatable: true, readable: true}
		f.gormlockTag, f.hasGormlockTag = tag.Lookup("gormlock")
		f.primaryKey = truth(settings["PRIMARYKEY"]) || truth(settings["PRIMARY_KEY"])
		hasType := true
		if val, ok := settings["-"]; ok {
			switch strings.ToLower(strings.TrimSpace(val)) {
			case "-", "all":
				f.creatable, f.updatable, f.readable, hasType = false, false, false, false
			}
		}
		if val, ok := settings["->"]; ok {
			f.creatable, f.updatable = false, false
			f.readable = strings.ToLower(val) != "false"
		}
		if val, ok := settings["<-"]; ok {
			f.creatable, f.updatable = true, true
			if val != "<-" {
				f.creatable = strings.Contains(val, "create")
				f.updatable = strings.Contains(val, "update")
			}
		}
		_, embeddedTag := settings["EMBEDDED"]
		inner := v.Type()
		if p, ok := inner.Underlying().(*types.Pointer); ok {
			inner = p.Elem()
		}
		innerStruct, isStruct := inner.Underlying().(*types.Struct)
		if isStruct && !isTimeOrValuer(inner) && (embeddedTag || v.Anonymous() && (f.creatable || f.updatable || f.readable)) {
			p := prefix
			if ep, ok := settings["EMBEDDEDPREFIX"]; ok {
				p = prefix + ep
			}
			out = append(out, m.flatten(innerStruct, p, depth+1, seen)...)
			continue
		}
		switch {
		case settings["COLUMN"] != "":
			f.column = prefix + settings["COLUMN"]
		case hasType && hasDataType(v.Type()):
			f.column = prefix + m.cfg.naming().ColumnName("", v.Name())
		}
		out = append(out, f)
	}
	return out
}

// versionField picks the version field as repository's versionField does,
// from the fields with a column (the outermost of those sharing a column).
// It returns nil where repository.New refuses the model.
func versionField(fields []field) *field {
	byCol := map[string]int{}
	var cols []string
	for i, f := range fields {
		if f.column == "" {
			continue
		}
		j, ok := byCol[f.column]
		if !ok {
			byCol[f.column] = i
			cols = append(cols, f.column)
			continue
		}
		if g := fields[j]; (f.creatable || f.updatable || f.readable) && f.depth < g.depth {
			byCol[f.column] = i
		}
	}
	var ver *field
	for _, c := range cols {
		f := &fields[byCol[c]]
		switch {
		case f.hasGormlockTag && f.gormlockTag == "version":
			if ver != nil && ver.hasGormlockTag && ver.gormlockTag == "version" {
				return nil // two tagged fields: repository.New refuses the model
			}
			ver = f
		case f.name == "Version" && (ver == nil || !(ver.hasGormlockTag && ver.gormlockTag == "version")):
			ver = f
		}
	}
	return ver
}

func (m *models) isInt64(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	if !ok {
		return false
	}
	switch b.Kind() {
	case types.Int64:
		return true
	case types.Int:
		return m.sizes == nil || m.sizes.Sizeof(b) == 8
	}
	return false
}

// hasDataType reports whether GORM gives a field of type t a column
// without a column tag: a number, a bool, a string, a time, []byte, or a
// type with a Value or Scan method.
func hasDataType(t types.Type) bool {
	if p, ok := t.Underlying().(*types.Pointer); ok {
		t = p.Elem()
	}
	if isTimeOrValuer(t) {
		return true
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		return u.Info()&(types.IsBoolean|types.IsNumeric|types.IsString) != 0
	case *types.Slice:
		b, ok := u.Elem().Underlying().(*types.Basic)
		return ok && b.Kind() == types.Byte
	}
	return false
}

func isTimeOrValuer(t types.Type) bool {
	if n, ok := types.Unalias(t).(*types.Named); ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "time" && n.Obj().Name() == "Time" {
		return true
	}
	for _, name := range []string{"Value", "Scan"} {
		obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(t), true, nil, name)
		if _, ok := obj.(*types.Func); ok {
			return true
		}
	}
	return false
}

// truth is GORM's utils.CheckTruth: a tag value that is not "false".
func truth(v string) bool { return v != "" && !strings.EqualFold(v, "false") }

func qualifiedName(pkg *types.Package, name string) string {
	if pkg == nil {
		return name
	}
	return pkg.Name() + "." + name
}

func isStd(pkg *types.Package) bool {
	p := pkg.Path()
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// gormlockModule is the library's module path.
const gormlockModule = "github.com/gormlock/gormlock"

// isLibrary reports whether path is a package of the gormlock library
// itself, whose guarded writes are built below GORM's API: its calls are
// not reported, and its own record types are no application's models. The
// examples, the benchmarks and the tests are applications like any other.
func isLibrary(path string) bool {
	rest, ok := strings.CutPrefix(path, gormlockModule+"/")
	if !ok {
		return path == gormlockModule
	}
	for _, app := range []string{"examples", "bench", "internal/tests", "gormlockvet/testdata", "otelgormlock/internal/tests"} {
		if rest == app || strings.HasPrefix(rest, app+"/") {
			return false
		}
	}
	return !strings.HasPrefix(rest, "gormlockvet")
}
