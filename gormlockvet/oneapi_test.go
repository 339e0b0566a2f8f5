package gormlockvet_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestOneAPI runs the analyzer over a real GORM application's code:
// one-api (github.com/songquanpeng/one-api, commit 8df4a267), its model
// package's files that write tokens, users, channels and redemptions (and
// abilities and logs). It reads them from a local checkout named by
// GORMLOCKVET_REALAPP and skips without one: the project keeps none of
// one-api's code. To run it:
//
//	git clone https://github.com/songquanpeng/one-api /tmp/one-api
//	git -C /tmp/one-api checkout 8df4a267
//	GORMLOCKVET_REALAPP=/tmp/one-api go test -run TestOneAPI ./gormlockvet/
//
// The test copies the files into a module of its own and makes the first
// step of an adoption there: Token, User, Channel and Redemption embed
// models.Versioning (the field and the import are added at the end of
// existing lines, so every line keeps its number). The packages the files
// import are stand-ins the test writes (oneAPIStandIns).
//
// Checked by hand: the files hold 26 plain GORM update and delete call
// sites of the four versioned models (grep for Update/Updates/Save/Delete),
// and every one of them is unguarded. The analyzer reports those 26 and
// nothing else: precision 26/26, recall 26/26. Silent, as they must be:
// the creates, the reads (Table("logs") sums, a Raw SELECT), and the
// writes of the unversioned Ability and Log. The rest of one-api only
// reads these tables (two First calls in controller/user.go), so these
// are the application's writes of them. Nine of the 26 change counters by
// gorm.Expr increments, which lose no increment by themselves but leave
// the version as it was (so a guarded writer of the same row overwrites
// them); for the five that increment one column the report names Apply
// with Add.
func TestOneAPI(t *testing.T) {
	checkout := os.Getenv("GORMLOCKVET_REALAPP")
	if checkout == "" {
		t.Skip("set GORMLOCKVET_REALAPP to a checkout of github.com/songquanpeng/one-api at commit 8df4a267 to run this optional check (see its doc comment)")
	}
	dir := oneAPIModule(t, checkout)
	want := []string{
		"channel.go:139 Updates model.Channel through Model(channel)",
		"channel.go:149 Updates model.Channel through Model(channel)",
		"channel.go:159 Updates model.Channel through Model(channel)",
		"channel.go:170 Delete model.Channel through Delete(channel)",
		"channel.go:195 Update model.Channel through Model(&Channel{})",
		"channel.go:210 Update model.Channel through Model(&Channel{}) Apply",
		"channel.go:217 Delete model.Channel through Delete(&Channel{})",
		"channel.go:222 Delete model.Channel through Delete(&Channel{})",
		"redemption.go:76 Update model.User through Model(&User{}) Apply",
		"redemption.go:82 Save model.Redemption through Save(redemption)",
		"redemption.go:100 Updates model.Redemption through Model(redemption)",
		"redemption.go:106 Updates model.Redemption through Model(redemption)",
		"redemption.go:112 Delete model.Redemption through Delete(redemption)",
		"token.go:135 Updates model.Token through Model(t)",
		"token.go:141 Updates model.Token through Model(t)",
		"token.go:146 Delete model.Token through Delete(t)",
		"token.go:185 Updates model.Token through Model(&Token{})",
		"token.go:207 Updates model.Token through Model(&Token{})",
		"user.go:180 Updates model.User through Model(user)",
		"user.go:191 Updates model.User through Model(user)",
		"user.go:308 Update model.User through Model(&User{})",
		"user.go:386 Update model.User through Model(&User{}) Apply",
		"user.go:402 Update model.User through Model(&User{}) Apply",
		"user.go:421 Updates model.User through Model(&User{})",
		"user.go:433 Updates model.User through Model(&User{})",
		"user.go:444 Update model.User through Model(&User{}) Apply",
	}
	report := regexp.MustCompile(`^unguarded (\w+) of versioned model ([\w.]+) \(table \w+\) through (\S+): `)
	var got []string
	for _, f := range analyze(t, dir, load(t, dir, true, "./...")) {
		m := report.FindStringSubmatch(f.message)
		file, ok := strings.CutPrefix(f.file, "model/")
		if m == nil || !ok {
			got = append(got, f.String())
			continue
		}
		line := fmt.Sprintf("%s:%d %s %s through %s", file, f.line, m[1], m[2], m[3])
		if strings.Contains(f.message, ".Apply(ctx, id, []repository.Change{repository.Add(") {
			line += " Apply"
		}
		got = append(got, line)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("reports on one-api:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// oneAPIFiles are the files of one-api's model package the test reads, and
// their SHA-256 at commit 8df4a267.
var oneAPIFiles = map[string]string{
	"ability.go":    "11cc7f510f7361fb8eb987b0cefef7e4567d700efee7fa6f4001057e837799d3",
	"channel.go":    "d34e81f3f89b6891498f98883fa017105722c4679b4564bc21e8f6508d53aedb",
	"log.go":        "bab83067b818a139ef9c5e743272e390ba75d42dcf61691ccb8e9794b6eedbe9",
	"redemption.go": "4cb4190521a49ac5785afe83b565a0c82b6a71bd4f42cd7475db7a219184a31c",
	"token.go":      "e2f519786480f5724c24707597ab7fb5867dd9f4f00ff3cf36865670ee1e8633",
	"user.go":       "989cd47d2089cfecf26b469e2f02f78c6ff4b1f70e5270e7ef9b4918b5efdc63",
	"utils.go":      "825d4d463b5a07f55e55a89d836546f11548a35ace22a7924163c60858f94495",
}

// oneAPIVersioned are the models the adoption versions, by file.
var oneAPIVersioned = map[string]string{"channel.go": "Channel", "redemption.go": "Redemption", "token.go": "Token", "user.go": "User"}

// oneAPIModule builds, in a temporary directory, a module of one-api's
// model files from checkout, adopted, beside the stand-ins; it returns the
// module's directory.
func oneAPIModule(t *testing.T, checkout string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The module requires what testdata/app requires: gormlock (this
	// repository) and GORM.
	mod, err := os.ReadFile("testdata/app/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("testdata/app/go.sum")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": strings.NewReplacer("module example.com/app", "module github.com/songquanpeng/one-api",
			"=> ../../..", "=> "+strconv.Quote(root)).Replace(string(mod)),
		"go.sum": string(sum),
	}
	for name, src := range oneAPIStandIns {
		files[name] = src
	}
	for name, hash := range oneAPIFiles {
		src, err := os.ReadFile(filepath.Join(checkout, "model", name))
		if err != nil {
			t.Fatalf("GORMLOCKVET_REALAPP: %v", err)
		}
		if h := sha256.Sum256(src); hex.EncodeToString(h[:]) != hash {
			t.Fatalf("GORMLOCKVET_REALAPP: model/%s is not the one of one-api's commit 8df4a267 (SHA-256 %x, want %s)", name, h, hash)
		}
		if typ, ok := oneAPIVersioned[name]; ok {
			src = adopt(t, name, src, typ)
		}
		files["model/"+name] = string(src)
	}
	for name, src := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// adopt makes the model typ of the file src embed models.Versioning: the
// import at the end of the line "import (", the field at the end of the
// line "type typ struct {".
func adopt(t *testing.T, name string, src []byte, typ string) []byte {
	t.Helper()
	s := string(src)
	for _, edit := range [][2]string{
		{"\nimport (\n", "\nimport ( \"github.com/gormlock/gormlock/models\";\n"},
		{"\ntype " + typ + " struct {\n", "\ntype " + typ + " struct { models.Versioning;\n"},
	} {
		if strings.Count(s, edit[0]) != 1 {
			t.Fatalf("model/%s: no single line %q to adopt %s at", name, strings.TrimSpace(edit[0]), typ)
		}
		s = strings.Replace(s, edit[0], edit[1], 1)
	}
	return []byte(s)
}

// oneAPIStandIns are the parts of one-api the model files use, written for
// the test (not one-api's code): just enough for the files to type-check.
var oneAPIStandIns = map[string]string{
	"model/standins.go": `package model

import "gorm.io/gorm"

var (
	DB     *gorm.DB
	LOG_DB *gorm.DB
)

func CacheGetTokenByKey(key string) (*Token, error) { return nil, nil }
`,
	"common/common.go": `package common

var (
	UsingPostgreSQL bool
	UsingSQLite     bool
	RedisEnabled    bool
)

func LogQuota(quota int64) string { return "" }

func Password2Hash(password string) (string, error) { return password, nil }

func ValidatePasswordAndHash(password string, hash string) bool { return password == hash }
`,
	"common/blacklist/blacklist.go": `package blacklist

func BanUser(id int) {}

func UnbanUser(id int) {}
`,
	"common/config/config.go": `package config

var (
	BatchUpdateEnabled   bool
	BatchUpdateInterval  int
	QuotaForNewUser      int64
	QuotaForInviter      int64
	QuotaForInvitee      int64
	QuotaRemindThreshold int64
	MaxRecentItems       int
	LogConsumeEnabled    bool
	ServerAddress        string
)
`,
	"common/helper/helper.go": `package helper

import "context"

func GetTimestamp() int64 { return 0 }

func String2Int(s string) int { return 0 }

func GetRequestID(ctx context.Context) string { return "" }
`,
	"common/logger/logger.go": `package logger

import "context"

func SysError(s string) {}

func SysLog(s string) {}

func Infof(ctx context.Context, format string, a ...any) {}

func Error(ctx context.Context, msg string) {}
`,
	"common/message/message.go": `package message

func SendEmail(subject string, receiver string, content string) error { return nil }

func EmailTemplate(title, content string) string { return "" }
`,
	"common/random/random.go": `package random

func GetUUID() string { return "" }

func GetRandomString(n int) string { return "" }

func GenerateKey() string { return "" }
`,
	"common/utils/utils.go": `package utils

func DeDuplication(slice []string) []string { return slice }
`,
}
