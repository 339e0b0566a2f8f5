//go:build linux

package patroni

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// httpClient talks to Patroni's REST API and etcd's HTTP endpoints on
// loopback: no proxy from the environment, no keep-alive between calls (a
// node restarts under it).
var httpClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// getJSON GETs url and decodes its JSON answer into v; any status but 200
// is an error.
func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w: %s", url, err, body)
	}
	return nil
}

// post POSTs the JSON body to url, waiting at most switchoverWait, and
// returns the status code and the answer's text.
func post(ctx context.Context, url string, body []byte) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, switchoverWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	text, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, strings.TrimSpace(string(text)), err
}
