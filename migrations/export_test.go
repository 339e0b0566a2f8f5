package migrations

// Created returns the tables the migrations create, by version, with
// their columns, as Up's adoption knows them.
func Created() map[int64][]string {
	out := map[int64][]string{}
	for v, t := range created {
		out[v] = append([]string{t.name}, t.columns...)
	}
	return out
}

// SplitStatements is splitStatements.
var SplitStatements = splitStatements
