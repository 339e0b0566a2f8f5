package repository

import (
	"bytes"
	"cmp"
	"fmt"
	"reflect"
)

// compareKeys orders two primary keys of the same type: integers by value,
// strings and byte arrays (UUIDs) bytewise, anything else by its printed
// form. Any consistent total order will do: it is the order in which batch
// writes take their row locks.
func compareKeys(a, b any) int {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() == vb.Type() {
		switch {
		case va.CanInt():
			return cmp.Compare(va.Int(), vb.Int())
		case va.CanUint():
			return cmp.Compare(va.Uint(), vb.Uint())
		case va.Kind() == reflect.String:
			return cmp.Compare(va.String(), vb.String())
		case va.Kind() == reflect.Array && va.Type().Elem().Kind() == reflect.Uint8:
			return bytes.Compare(arrayBytes(va), arrayBytes(vb))
		}
	}
	return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func arrayBytes(v reflect.Value) []byte {
	b := make([]byte, v.Len())
	reflect.Copy(reflect.ValueOf(b), v)
	return b
}
