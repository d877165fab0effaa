package mountinfo

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	table := `22 1 0:21 / /proc rw,nosuid - proc proc rw
36 22 0:45 / /mnt/my\040fs rw,relatime shared:1 master:2 - fuse.stripefs 127.0.0.1:9400 rw,user_id=0,allow_other
a line the kernel never writes
37 22 0:46 / /mnt/x rw - fuse.stripefs
38 22 0:47 / /mnt/back\134slash rw - ext4 /dev/vda rw
`
	got, err := Parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Dev: "0:21", Point: "/proc", Options: []string{"rw", "nosuid"}, FSType: "proc", Super: []string{"rw"}},
		{Dev: "0:45", Point: "/mnt/my fs", Options: []string{"rw", "relatime"}, FSType: "fuse.stripefs",
			Super: []string{"rw", "user_id=0", "allow_other"}},
		{Dev: "0:47", Point: `/mnt/back\slash`, Options: []string{"rw"}, FSType: "ext4", Super: []string{"rw"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
	}
	if _, err := Read(); err != nil {
		t.Errorf("Read: %v", err)
	}
}
