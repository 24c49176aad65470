// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cachedecode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Why the informers' lists are read one item at a time: kube-apiserver
// answers an informer's first list (resource version 0) from its cache in
// one response, whatever the page size. At 100,000 bound claims that is two
// bodies of about 100 MB, which a client holds whole while it decodes them
// (over 500 MB at the start-up's peak), into slices of whole-sized structs.
// A watch-list stream avoids that but costs kube-apiserver about twice the
// CPU, which is most of a restart's time on a busy control plane; a list in
// pages from a consistent read is answered from etcd once the cache's
// snapshots have been compacted away (measured: 7-10 s of kube-apiserver's
// CPU). Read as a stream, the one-response list costs neither.

// maxListItem bounds the encoding of one item: kube-apiserver stores no
// object over 1.5 MiB in etcd by default, and nothing bigger is a claim or
// a PV this decoder should believe.
const maxListItem = 16 << 20

// maxList bounds the encoding of a whole list, far above any cluster's.
const maxList = 1 << 40

// ListClaims lists claims through core and returns the unsettled ones, the
// claim informer's list, reading kube-apiserver's response one claim at a
// time.
func ListClaims(ctx context.Context, core corev1client.CoreV1Interface, opts metav1.ListOptions) (runtime.Object, error) {
	return streamList(ctx, core, "persistentvolumeclaims", opts, readClaimList)
}

// ListVolumes lists PVs through core, bound ones as the cache keeps them
// and the others whole, reading kube-apiserver's response one PV at a time.
func ListVolumes(ctx context.Context, core corev1client.CoreV1Interface, opts metav1.ListOptions) (runtime.Object, error) {
	return streamList(ctx, core, "persistentvolumes", opts, readVolumeList)
}

// streamList lists resource through core and reads the response with read.
func streamList(ctx context.Context, core corev1client.CoreV1Interface, resource string, opts metav1.ListOptions,
	read func(io.Reader) (runtime.Object, error)) (runtime.Object, error) {
	body, err := core.RESTClient().Get().Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	list, err := read(body)
	if err != nil {
		return nil, fmt.Errorf("reading the list of %s: %w", resource, err)
	}
	return list, nil
}

// readClaimList reads a claim list's unsettled claims.
func readClaimList(body io.Reader) (runtime.Object, error) {
	return readList(body, "PersistentVolumeClaimList", &corev1.PersistentVolumeClaimList{},
		func(item []byte) (runtime.Object, error) {
			if _, settled := readSettledClaim(item); settled {
				return nil, nil
			}
			claim := &corev1.PersistentVolumeClaim{}
			return claim, claim.Unmarshal(item)
		},
		func(obj runtime.Object) bool { return !ClaimSettled(obj.(*corev1.PersistentVolumeClaim)) })
}

// readVolumeList reads a PV list, bound PVs as the cache keeps them.
func readVolumeList(body io.Reader) (runtime.Object, error) {
	return readList(body, "PersistentVolumeList", &corev1.PersistentVolumeList{},
		func(item []byte) (runtime.Object, error) {
			if pv, bound := readBoundVolume(item); bound {
				return pv, nil
			}
			pv := &corev1.PersistentVolume{}
			return pv, pv.Unmarshal(item)
		}, nil)
}

// readList reads a list of kind from body: its metadata, and the objects
// decode makes of its items (nil: left out), each allocated on its own so
// that no slice of whole-sized structs grows with the list. A list that is
// not in protobuf (from a JSON-only server) is decoded whole into list, its
// items kept where keep says so (nil: all).
func readList(body io.Reader, kind string, list runtime.Object,
	decode func(item []byte) (runtime.Object, error), keep func(runtime.Object) bool) (runtime.Object, error) {
	r := &wireReader{r: bufio.NewReaderSize(body, 64<<10)}
	prefix, err := r.r.Peek(len(protobufPrefix))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if !bytes.Equal(prefix, protobufPrefix) {
		return decodeWhole(r.r, list, keep)
	}
	_, _ = r.r.Discard(len(protobufPrefix))
	out := &metainternalversion.List{}
	err = readListStream(r, kind, &out.ListMeta, func(item []byte) error {
		obj, err := decode(item)
		if obj != nil && err == nil {
			out.Items = append(out.Items, obj)
		}
		return err
	}, func() { *out = metainternalversion.List{} })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// decodeWhole decodes a list that is not in protobuf with the scheme's
// decoder.
func decodeWhole(r io.Reader, list runtime.Object, keep func(runtime.Object) bool) (runtime.Object, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if err := runtime.DecodeInto(scheme.Codecs.UniversalDeserializer(), data, list); err != nil {
		return nil, err
	}
	if keep == nil {
		return list, nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := &metainternalversion.List{}
	if listMeta, err := meta.ListAccessor(list); err == nil {
		out.ResourceVersion, out.Continue = listMeta.GetResourceVersion(), listMeta.GetContinue()
	}
	for _, item := range items {
		if keep(item) {
			out.Items = append(out.Items, item)
		}
	}
	return out, nil
}

// readListStream reads, from after protobufPrefix, the runtime.Unknown of a
// list of kind: the list's metadata into listMeta and each item's encoding
// to item, one at a time. It decodes what the scheme's decoder would decode
// whole: a later encoded list replaces an earlier one (reset is called), and
// type metadata are merged. The bytes item gets are reused for the next
// item: decoders must copy what they keep (the generated Unmarshal and
// readBoundVolume do).
func readListStream(r *wireReader, kind string, listMeta *metav1.ListMeta, item func([]byte) error, reset func()) error {
	s := &listStream{r: r, listMeta: listMeta, item: item, reset: reset}
	for {
		num, typ, err := r.field()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := s.readField(num, typ); err != nil {
			return err
		}
	}
	if s.typeMeta.Kind != "" && s.typeMeta.Kind != kind {
		return fmt.Errorf("the response is a %s, not a %s", s.typeMeta.Kind, kind)
	}
	return s.listErr // with no list field, an empty list, as the scheme's decoder has it
}

// listStream is what readListStream has read so far.
type listStream struct {
	r        *wireReader
	listMeta *metav1.ListMeta
	item     func([]byte) error
	reset    func()
	buf      []byte
	typeMeta runtime.TypeMeta // the kind is checked; the version is the client's to check
	listErr  error            // of the last list: an earlier one's does not count
	lists    int
}

// readField reads one field of the runtime.Unknown: its typeMeta or its raw
// list; any other is skipped.
func (s *listStream) readField(num protowire.Number, typ protowire.Type) error {
	if typ != protowire.BytesType || num > 2 { // contentEncoding and contentType too, as the scheme's decoder
		return s.r.skip(typ)
	}
	n, err := s.r.length(num == 2)
	if err != nil {
		return err
	}
	if num == 1 {
		return s.readTypeMeta(n)
	}
	return s.readList(n)
}

// readTypeMeta reads the n bytes of typeMeta, merged into what earlier
// ones said, as the generated decoder does.
func (s *listStream) readTypeMeta(n uint64) error {
	var err error
	if s.buf, err = s.r.bytes(s.buf, n); err != nil {
		return err
	}
	if err := s.typeMeta.Unmarshal(s.buf); err != nil {
		return fmt.Errorf("malformed type metadata: %w", err)
	}
	return nil
}

// readList reads raw: the list, field by field within its n bytes. A later
// list replaces an earlier one.
func (s *listStream) readList(n uint64) error {
	if s.lists++; s.lists > 1 {
		s.reset()
	}
	r := s.r
	end := r.read + n
	r.end = end
	s.buf, s.listErr = readListMessage(r, s.buf, s.listMeta, s.item)
	r.end = 0
	return r.discard(end - r.read)
}

// readListMessage reads a list message up to r's end: field 1 its
// metadata, field 2 each item.
func readListMessage(r *wireReader, buf []byte, listMeta *metav1.ListMeta, item func([]byte) error) ([]byte, error) {
	for r.read < r.end {
		num, typ, err := r.field()
		if err != nil {
			return buf, unexpectedEOF(err)
		}
		if typ != protowire.BytesType || (num != 1 && num != 2) {
			if err := r.skip(typ); err != nil {
				return buf, err
			}
			continue
		}
		size, err := r.length(false)
		if err != nil {
			return buf, err
		}
		if buf, err = r.bytes(buf, size); err != nil {
			return buf, err
		}
		if num == 1 {
			err = listMeta.Unmarshal(buf)
		} else {
			err = item(buf)
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// wireReader reads protobuf's wire format from a stream, counting the
// bytes read, and not past end when end is set (a length-delimited
// field's).
type wireReader struct {
	r    *bufio.Reader
	read uint64
	end  uint64
}

// errPastEnd: a field runs past the end of the field it is in.
var errPastEnd = errors.New("malformed field: it runs past the end of its message")

// within says whether n more bytes lie within end.
func (w *wireReader) within(n uint64) bool {
	return w.end == 0 || (w.read <= w.end && n <= w.end-w.read)
}

func (w *wireReader) ReadByte() (byte, error) {
	if !w.within(1) {
		return 0, errPastEnd
	}
	b, err := w.r.ReadByte()
	if err == nil {
		w.read++
	}
	return b, err
}

// tag reads a field's number and wire type; io.EOF only when the stream
// ends before it.
func (w *wireReader) tag() (protowire.Number, protowire.Type, error) {
	if _, err := w.r.Peek(1); err != nil {
		return 0, 0, err
	}
	v, err := binary.ReadUvarint(w)
	if err != nil {
		return 0, 0, unexpectedEOF(err)
	}
	num, typ := protowire.DecodeTag(v)
	return num, typ, nil
}

// field reads a message's next field's tag, as tag, refusing what the
// generated decoders refuse.
func (w *wireReader) field() (protowire.Number, protowire.Type, error) {
	num, typ, err := w.tag()
	if err == nil && (num < protowire.MinValidNumber || typ == protowire.EndGroupType) {
		return 0, 0, errors.New("malformed field tag")
	}
	return num, typ, err
}

// length reads a length-delimited field's length: at most maxListItem but
// for the list itself (whole).
func (w *wireReader) length(whole bool) (uint64, error) {
	n, err := binary.ReadUvarint(w)
	if err != nil {
		return 0, unexpectedEOF(err)
	}
	if n > maxListItem && (!whole || n > maxList) {
		return 0, fmt.Errorf("a field of %d bytes, more than any claim or PV", n)
	}
	return n, nil
}

// bytes reads n bytes into buf's storage, grown if need be.
func (w *wireReader) bytes(buf []byte, n uint64) ([]byte, error) {
	if !w.within(n) {
		return buf, errPastEnd
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(w.r, buf); err != nil {
		return buf, unexpectedEOF(err)
	}
	w.read += n
	return buf, nil
}

// discard reads past n bytes.
func (w *wireReader) discard(n uint64) error {
	if !w.within(n) {
		return errPastEnd
	}
	if n > maxListItem {
		return fmt.Errorf("a field of %d bytes, more than any claim or PV", n)
	}
	if _, err := w.r.Discard(int(n)); err != nil {
		return unexpectedEOF(err)
	}
	w.read += n
	return nil
}

// skip reads past a field of wire type typ.
func (w *wireReader) skip(typ protowire.Type) error {
	switch typ {
	case protowire.VarintType:
		_, err := binary.ReadUvarint(w)
		return unexpectedEOF(err)
	case protowire.Fixed64Type:
		return w.discard(8)
	case protowire.Fixed32Type:
		return w.discard(4)
	case protowire.BytesType:
		n, err := w.length(false)
		if err != nil {
			return err
		}
		return w.discard(n)
	case protowire.StartGroupType: // deprecated, but skipped as the generated decoders do
		for {
			_, typ, err := w.tag()
			if err != nil {
				return unexpectedEOF(err)
			}
			if typ == protowire.EndGroupType {
				return nil
			}
			if err := w.skip(typ); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("malformed field of wire type %d", typ)
	}
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
