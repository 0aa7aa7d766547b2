// Command ichor-talos-probe is the real Talos client, for the tests that hold the test kit's fake
// apid (hack/testkit/src/talos/) and Ichor's own Talos client (lib/talos, ichor-talos)
// to what Talos speaks. It is built on github.com/siderolabs/talos/pkg/machinery — the client
// library, configuration loader and generator talosctl itself uses — by hack/talos/build.sh.
//
// Usage:
//
//	ichor-talos-probe --talosconfig FILE --node NODE apply --mode no-reboot FILE
//	ichor-talos-probe --talosconfig FILE --node NODE machineconfig
//	ichor-talos-probe --talosconfig FILE --node NODE version
//	ichor-talos-probe validate [--mode metal|cloud|container] [--strict] FILE...
//	ichor-talos-probe generate [--type controlplane|worker] [--cluster NAME] [--endpoint URL]
//
// The three API calls use the talosconfig's current context (its first endpoint, CA, client
// certificate and key) and name the target node in the gRPC metadata key `node`, as
// `talosctl -n NODE` does (client.WithNode):
//
//   - apply: client.ApplyConfiguration with the file's bytes; prints the one reply as JSON
//     {"mode": "NO_REBOOT", "modeDetails": "...", "warnings": [...], "messages": 1}.
//   - machineconfig: reads the MachineConfig resource (namespace `config`, type
//     `MachineConfigs.config.talos.dev`, ID `v1alpha1`) through the client's COSI state, which
//     decodes it with configloader as talosctl does, and prints the configuration's bytes.
//   - version: client.Version; prints {"tag", "sha", "built", "goVersion", "os", "arch",
//     "platform": {"name", "mode"} | null, "features": {"rbac"} | null, "messages": n}.
//
// A call the server refuses prints {"error": {"code": "PermissionDenied", "message": "..."}} on
// stdout and exits with status 3; any other failure prints a sentence on stderr and exits 1.
//
// validate loads each file with configloader.NewFromBytes (the loader apid's ApplyConfiguration
// uses) and runs the machinery's client-side validation (ValidateAsClient, the code of the
// deprecated Validate) in the given runtime mode: by default `metal` (an installed machine, not
// in a container), the platform of a real control plane. Client-side validation reads no
// hardware (the checks against disks and EFI variables are in ValidateAtRuntime, which runs on
// the node). It prints `FILE: ok` or `FILE: warning: ...` per file, and on the first failure the
// error and exit status 1. --strict turns warnings into errors, as talosctl validate --strict.
//
// generate prints a fresh machine configuration (control plane by default) for the v1.14
// version contract, as `talosctl gen config` makes one: the v1alpha1 document and the
// multi-document Kubernetes configuration, with its default KubeAuthenticationConfig (new
// secrets every run; comments left out).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/config"
	"github.com/siderolabs/talos/pkg/machinery/config/configloader"
	"github.com/siderolabs/talos/pkg/machinery/config/encoder"
	"github.com/siderolabs/talos/pkg/machinery/config/generate"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/config/validation"
	"github.com/siderolabs/talos/pkg/machinery/constants"
	configres "github.com/siderolabs/talos/pkg/machinery/resources/config"
)

const usage = `usage:
  ichor-talos-probe --talosconfig FILE --node NODE apply --mode no-reboot FILE
  ichor-talos-probe --talosconfig FILE --node NODE machineconfig
  ichor-talos-probe --talosconfig FILE --node NODE version
  ichor-talos-probe validate [--mode metal|cloud|container] [--strict] FILE...
  ichor-talos-probe generate [--type controlplane|worker] [--cluster NAME] [--endpoint URL]
`

// callTimeout bounds the connection and each call.
const callTimeout = 30 * time.Second

// exitRefused is the exit status of a call the server refused with a gRPC status.
const exitRefused = 3

func main() {
	global := flag.NewFlagSet("ichor-talos-probe", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	talosconfig := global.String("talosconfig", "", "the talosconfig file")
	node := global.String("node", "", "the target node (the gRPC `node` metadata value)")

	if err := global.Parse(os.Args[1:]); err != nil || global.NArg() == 0 {
		fail(fmt.Errorf("%v\n%s", errOr(err, "no command"), usage))
	}

	command, args := global.Arg(0), global.Args()[1:]

	var err error

	switch command {
	case "apply", "machineconfig", "version":
		err = call(command, *talosconfig, *node, args)
	case "validate":
		err = validate(args)
	case "generate":
		err = generateConfig(args)
	default:
		err = fmt.Errorf("unknown command %q\n%s", command, usage)
	}

	if err != nil {
		fail(err)
	}
}

func errOr(err error, text string) string {
	if err != nil {
		return err.Error()
	}

	return text
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "ichor-talos-probe: %v\n", err)
	os.Exit(1)
}

// refused reports a gRPC status (or a COSI not-found) as JSON and exits; other errors are
// returned as they are.
func refused(err error) error {
	code, message := codes.Unknown, ""

	switch st, ok := status.FromError(err); {
	case ok:
		code, message = st.Code(), st.Message()
	case state.IsNotFoundError(err):
		// The COSI client wraps the NotFound status without unwrapping: its text is the status's.
		code, message = codes.NotFound, strings.TrimPrefix(err.Error(), "rpc error: code = NotFound desc = ")
	default:
		return err
	}

	out, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code.String(), "message": message}}) //nolint:errchkjson
	fmt.Println(string(out))
	fmt.Fprintf(os.Stderr, "ichor-talos-probe: the node refused the call: %s: %s\n", code, message)
	os.Exit(exitRefused)

	return nil
}

func printJSON(v any) error {
	out, err := json.Marshal(v)
	if err != nil {
		return err
	}

	fmt.Println(string(out))

	return nil
}

// call runs one machine API or COSI call against node through the talosconfig's endpoint.
func call(command, talosconfig, node string, args []string) error {
	if talosconfig == "" || node == "" {
		return fmt.Errorf("%s needs --talosconfig and --node\n%s", command, usage)
	}

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()

	c, err := client.New(ctx, client.WithConfigFromFile(talosconfig))
	if err != nil {
		return fmt.Errorf("connecting with %s: %w", talosconfig, err)
	}

	defer c.Close() //nolint:errcheck

	ctx = client.WithNode(ctx, node)

	switch command {
	case "apply":
		return apply(ctx, c, args)
	case "machineconfig":
		return machineConfig(ctx, c, args)
	default:
		return version(ctx, c, args)
	}
}

func apply(ctx context.Context, c *client.Client, args []string) error {
	flags := flag.NewFlagSet("apply", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	mode := flags.String("mode", "", "the apply mode (only no-reboot)")

	if err := flags.Parse(args); err != nil || flags.NArg() != 1 {
		return fmt.Errorf("apply: %v\n%s", errOr(err, "one FILE expected"), usage)
	}

	if *mode != "no-reboot" {
		return fmt.Errorf("apply: --mode %q: only no-reboot is supported", *mode)
	}

	data, err := os.ReadFile(flags.Arg(0))
	if err != nil {
		return err
	}

	resp, err := c.ApplyConfiguration(ctx, &machineapi.ApplyConfigurationRequest{
		Data: data,
		Mode: machineapi.ApplyConfigurationRequest_NO_REBOOT,
	})
	if err != nil {
		return refused(err)
	}

	messages := resp.GetMessages()
	if len(messages) == 0 {
		return errors.New("ApplyConfiguration: the reply holds no message")
	}

	first := messages[0]

	return printJSON(map[string]any{
		"mode":        first.GetMode().String(),
		"modeDetails": first.GetModeDetails(),
		"warnings":    nonNil(first.GetWarnings()),
		"messages":    len(messages),
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}

	return s
}

func machineConfig(ctx context.Context, c *client.Client, args []string) error {
	if len(args) != 0 {
		return fmt.Errorf("machineconfig takes no arguments\n%s", usage)
	}

	md := resource.NewMetadata(configres.NamespaceName, configres.MachineConfigType, configres.ActiveID, resource.VersionUndefined)

	mc, err := safe.StateGet[*configres.MachineConfig](ctx, c.COSI, md)
	if err != nil {
		return refused(err)
	}

	if got := mc.Metadata(); got.Type() != configres.MachineConfigType || got.ID() != configres.ActiveID {
		return fmt.Errorf("State.Get: the reply is %s/%s, not %s/%s", got.Type(), got.ID(), configres.MachineConfigType, configres.ActiveID)
	}

	data, err := mc.Provider().Bytes()
	if err != nil {
		return fmt.Errorf("the machine configuration's bytes: %w", err)
	}

	_, err = os.Stdout.Write(data)

	return err
}

func version(ctx context.Context, c *client.Client, args []string) error {
	if len(args) != 0 {
		return fmt.Errorf("version takes no arguments\n%s", usage)
	}

	resp, err := c.Version(ctx)
	if err != nil {
		return refused(err)
	}

	messages := resp.GetMessages()
	if len(messages) == 0 {
		return errors.New("Version: the reply holds no message")
	}

	first := messages[0]
	v := first.GetVersion()
	out := map[string]any{
		"tag":       v.GetTag(),
		"sha":       v.GetSha(),
		"built":     v.GetBuilt(),
		"goVersion": v.GetGoVersion(),
		"os":        v.GetOs(),
		"arch":      v.GetArch(),
		"platform":  nil,
		"features":  nil,
		"messages":  len(messages),
	}

	if p := first.GetPlatform(); p != nil {
		out["platform"] = map[string]string{"name": p.GetName(), "mode": p.GetMode()}
	}

	if f := first.GetFeatures(); f != nil {
		out["features"] = map[string]bool{"rbac": f.GetRbac()}
	}

	return printJSON(out)
}

// runtimeMode is a validation.RuntimeMode: Talos's own modes live in its internal packages,
// outside the machinery module; these three are theirs by name and answers.
type runtimeMode struct {
	name            string
	requiresInstall bool
	inContainer     bool
}

func (m runtimeMode) String() string        { return m.name }
func (m runtimeMode) RequiresInstall() bool { return m.requiresInstall }
func (m runtimeMode) InContainer() bool     { return m.inContainer }

var modes = map[string]runtimeMode{
	"metal":     {name: "metal", requiresInstall: true},
	"cloud":     {name: "cloud"},
	"container": {name: "container", inContainer: true},
}

func validate(args []string) error {
	flags := flag.NewFlagSet("validate", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	modeName := flags.String("mode", "metal", "the runtime mode: metal, cloud or container")
	strict := flags.Bool("strict", false, "warnings are errors")

	if err := flags.Parse(args); err != nil || flags.NArg() == 0 {
		return fmt.Errorf("validate: %v\n%s", errOr(err, "at least one FILE expected"), usage)
	}

	mode, ok := modes[*modeName]
	if !ok {
		return fmt.Errorf("validate: unknown --mode %q (metal, cloud or container)", *modeName)
	}

	var options []validation.Option
	if *strict {
		options = append(options, validation.WithStrict())
	}

	for _, file := range flags.Args() {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}

		provider, err := configloader.NewFromBytes(data)
		if err != nil {
			return fmt.Errorf("%s: does not load: %w", file, err)
		}

		warnings, err := provider.ValidateAsClient(mode, options...)
		if err != nil {
			return fmt.Errorf("%s: invalid in %s mode: %w", file, mode, err)
		}

		if len(warnings) == 0 {
			fmt.Printf("%s: ok\n", file)
		}

		for _, w := range warnings {
			fmt.Printf("%s: warning: %s\n", file, strings.ReplaceAll(w, "\n", " "))
		}
	}

	return nil
}

func generateConfig(args []string) error {
	flags := flag.NewFlagSet("generate", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	typeName := flags.String("type", "controlplane", "the machine type: controlplane or worker")
	cluster := flags.String("cluster", "ichor-probe", "the cluster name")
	endpoint := flags.String("endpoint", "https://10.0.1.5:6443", "the control plane endpoint")

	if err := flags.Parse(args); err != nil || flags.NArg() != 0 {
		return fmt.Errorf("generate: %v\n%s", errOr(err, "no arguments expected"), usage)
	}

	var machineType machine.Type

	switch *typeName {
	case "controlplane":
		machineType = machine.TypeControlPlane
	case "worker":
		machineType = machine.TypeWorker
	default:
		return fmt.Errorf("generate: unknown --type %q (controlplane or worker)", *typeName)
	}

	input, err := generate.NewInput(*cluster, *endpoint, constants.DefaultKubernetesVersion,
		generate.WithVersionContract(config.TalosVersion1_14))
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}

	provider, err := input.Config(machineType)
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}

	data, err := provider.EncodeBytes(encoder.WithComments(encoder.CommentsDisabled))
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}

	_, err = os.Stdout.Write(data)

	return err
}
