package gateway

import (
	"fmt"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// nodeBoundCodec is gRPC's proto codec with one check before decoding a
// discovery request: the size of its node on the wire. A node's metadata
// is a google.protobuf.Struct the client fills at will; 100 streams each
// sending 3.75 MB of it held 940 MB while gRPC decoded them (the Struct
// decodes into many small Go values, about 2.5 times the wire size). The
// check reads only the top-level field tags, so a refused node is never
// decoded, and the receive buffer goes back to gRPC's pool at once.
type nodeBoundCodec struct {
	encoding.CodecV2
	limit   int
	refused func() // counts one refusal
}

// Field numbers of the node in the two request types.
const (
	sotwNodeField  protowire.Number = 2 // DiscoveryRequest.node
	deltaNodeField protowire.Number = 1 // DeltaDiscoveryRequest.node
)

// NodeTooLargeError is a request whose node is larger than Limits.NodeBytes.
type NodeTooLargeError struct {
	Size, Limit int
}

func (e *NodeTooLargeError) Error() string {
	return fmt.Sprintf("xds node of %d bytes, more than the %d-byte limit (--xds-max-node-bytes): keep node metadata small", e.Size, e.Limit)
}

func (c nodeBoundCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var field protowire.Number
	switch v.(type) {
	case *discoveryv3.DiscoveryRequest:
		field = sotwNodeField
	case *discoveryv3.DeltaDiscoveryRequest:
		field = deltaNodeField
	default:
		return c.CodecV2.Unmarshal(data, v)
	}
	var buf []byte
	if len(data) == 1 {
		buf = data[0].ReadOnlyData() // no copy: gRPC reads a message into one buffer
	} else {
		buf = data.Materialize()
	}
	if size := fieldBytes(buf, field); size > c.limit {
		c.refused()
		return &NodeTooLargeError{Size: size, Limit: c.limit}
	}
	return c.CodecV2.Unmarshal(data, v)
}

// fieldBytes adds up the lengths of every occurrence of a length-delimited
// top-level field (occurrences of a message field merge, so all count).
// Malformed input stops the scan; the proto decoder then reports it.
func fieldBytes(b []byte, field protowire.Number) int {
	total := 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return total
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return total
		}
		if num == field && typ == protowire.BytesType {
			total += m
		}
		b = b[m:]
	}
	return total
}
