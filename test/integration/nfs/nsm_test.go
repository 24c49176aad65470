// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"
)

// NSM (rpc.statd) over ONC RPC, as Ganesha's lock manager calls it when a
// client takes its first lock: SM_MON asks rpc.statd to remember the
// client, so that after a restart the client is told to reclaim its locks.
const (
	nsmProgram = 100024
	nsmVersion = 1
	nsmProcMon = 2
	// nlmProgram and its SM_NOTIFY callback are what Ganesha registers.
	nlmProgram  = 100021
	nlmVersion  = 4
	nlmProcNSMN = 16
)

// smMon sends SM_MON for monName to the rpc.statd at addr and returns its
// sm_res (0 is stat_succ).
func smMon(addr, monName string) (uint32, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var call bytes.Buffer
	u32 := func(v uint32) { _ = binary.Write(&call, binary.BigEndian, v) }
	str := func(s string) {
		u32(uint32(len(s)))
		call.WriteString(s)
		call.Write(make([]byte, (4-len(s)%4)%4))
	}
	u32(0x4b50524f)              // xid
	u32(0)                       // CALL
	u32(2)                       // RPC version
	u32(nsmProgram)              // program
	u32(nsmVersion)              // version
	u32(nsmProcMon)              // procedure
	u32(0)                       // credential AUTH_NULL
	u32(0)                       //   of length 0
	u32(0)                       // verifier AUTH_NULL
	u32(0)                       //   of length 0
	str(monName)                 // mon_id.mon_name: the client
	str("127.0.0.1")             // my_id.my_name: this server
	u32(nlmProgram)              // my_id.my_prog
	u32(nlmVersion)              // my_id.my_vers
	u32(nlmProcNSMN)             // my_id.my_proc
	call.Write(make([]byte, 16)) // priv
	// One record, last fragment.
	header := make([]byte, 4)
	binary.BigEndian.PutUint32(header, 0x80000000|uint32(call.Len()))
	if _, err := conn.Write(append(header, call.Bytes()...)); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(conn, header); err != nil {
		return 0, err
	}
	reply := make([]byte, binary.BigEndian.Uint32(header)&0x7fffffff)
	if _, err := io.ReadFull(conn, reply); err != nil {
		return 0, err
	}
	// xid, REPLY, MSG_ACCEPTED, verifier (flavor, length 0), SUCCESS, sm_stat_res {res_stat, state}.
	if len(reply) < 32 {
		return 0, fmt.Errorf("short SM_MON reply (%d bytes)", len(reply))
	}
	word := func(i int) uint32 { return binary.BigEndian.Uint32(reply[4*i:]) }
	if word(1) != 1 || word(2) != 0 || word(5) != 0 {
		return 0, fmt.Errorf("SM_MON not accepted: reply %x", reply)
	}
	return word(6), nil
}
