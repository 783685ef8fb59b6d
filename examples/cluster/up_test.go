package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUpShouldRefuseWhatCannotWork(t *testing.T) {
	for args, want := range map[string]string{
		"up --timings slow":                         `--timings "slow": want fast or kube`,
		"up --store redis://x":                      `--store "redis://x": want mem, etcd://host:port`,
		"up --lock cp":                              "--lock needs a store that the up processes share",
		"up --read-only-token r":                    "--read-only-token needs --token",
		"up --log-level loud":                       `--log-level "loud"`,
		"agent --node n1 --cpu lots --api http://x": `quantity "lots"`,
		"agent --cpu 1":                             "a node name is required",
	} {
		var out, errOut bytes.Buffer
		code := realMain(strings.Fields(args), &out, &errOut)
		assert.Equal(t, 1, code, args)
		assert.Contains(t, errOut.String(), want, args)
	}
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, realMain([]string{"sideways"}, &out, &errOut))
	assert.Contains(t, errOut.String(), `unknown mode "sideways"`)
}
