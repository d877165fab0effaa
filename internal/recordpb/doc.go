// Package recordpb is the schema of the records stripefs stores: an MDT's
// inodes, directory entries and update-log records, and an OST's index
// values, as protocol buffers (records.proto). Tagged fields let a record
// grow without a database migration: older records read a new field as
// zero, older code skips it. The MDT (database format 6) and the OST
// (index format 2) convert what older builds wrote on first open. The
// marshallers are vtprotobuf's (records_vtproto.pb.go): generated code,
// no reflection, byte for byte the standard encoding.
//
// The RPC messages keep package wire's positional codec: both ends of a
// connection run one protocol version, checked at the handshake, so they
// gain nothing from tags, and their codec is the faster.
package recordpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-vtproto_out=. --go-vtproto_opt=paths=source_relative,features=marshal+unmarshal+size records.proto
