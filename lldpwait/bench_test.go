package lldpwait

import "testing"

// BenchmarkParse measures the cost of decoding one frame: a UniFi-shaped
// frame (108 bytes) and the frame lldpd sends (195 bytes, with a system
// description, a management address and organizational TLVs).
func BenchmarkParse(b *testing.B) {
	for _, bm := range []struct {
		name  string
		frame []byte
	}{
		{"unifi", unifiFrame("Port 5")},
		{"lldpd", lldpdFrame},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(bm.frame)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(bm.frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPort measures naming the port with the default rules: a UniFi
// "Port N" (the first rule) and lldpd's MAC port ID with "eth4" in the
// description (the fifth).
func BenchmarkPort(b *testing.B) {
	for _, bm := range []struct {
		name string
		n    *Neighbor
		want int
	}{
		{"unifi", nb(PortLocal, "Port 5", "Port 5"), 5},
		{"lldpd", nb(PortMACAddress, "12:0e:7d:9e:51:8d", "eth4"), 5},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p, err := Port(bm.n, nil); p != bm.want || err != nil {
					b.Fatal(p, err)
				}
			}
		})
	}
}
