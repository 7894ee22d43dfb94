// Command goclients: genuine Go Kafka clients (franz-go, its kadm, sarama) driven by
// tests/interop/test_go_clients.py against kraftnode and genuine Kafka. One binary, one
// subcommand per job; every answer is one JSON object on stdout.
//
//	goclients produce BOOTSTRAP TOPIC PREFIX N
//	goclients franz-consume BOOTSTRAP TOPIC GROUP PREFIX N TIMEOUT_MS classic|consumer
//	goclients sarama-consume BOOTSTRAP TOPIC GROUP PREFIX N TIMEOUT_MS
//	goclients admin BOOTSTRAP NODE_ID TOPIC GROUP...
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: goclients produce|franz-consume|sarama-consume|admin ARGS"))
	}
	args := os.Args[2:]
	var out any
	var err error
	switch os.Args[1] {
	case "produce":
		need(args, 4)
		out, err = produce(args[0], args[1], args[2], atoi(args[3]))
	case "franz-consume":
		need(args, 7)
		out, err = franzConsume(args[0], args[1], args[2], args[3], atoi(args[4]), atoi(args[5]), args[6])
	case "sarama-consume":
		need(args, 6)
		out, err = saramaConsume(args[0], args[1], args[2], args[3], atoi(args[4]), atoi(args[5]))
	case "admin":
		need(args, 3)
		out, err = admin(args[0], int32(atoi(args[1])), args[2], args[3:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fail(err)
	}
}

func need(args []string, n int) {
	if len(args) < n {
		fail(fmt.Errorf("%s needs %d arguments, got %d", os.Args[1], n, len(args)))
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(err)
	}
	return n
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "goclients:", err)
	os.Exit(1)
}
