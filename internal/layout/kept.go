package layout

import "time"

// Every is how long a layout is kept: a driver loaded, or a device
// renamed, after the exporter started shows within it.
const Every = time.Minute

// Kept is a collector's latest layout and when it was discovered; the
// collector's lock guards it.
type Kept[L any] struct {
	layout *L
	at     time.Time
}

// Get returns the layout discovered less than Every before now, else
// discover's, which it keeps.
func (k *Kept[L]) Get(now time.Time, discover func() *L) *L {
	if k.layout == nil || now.Sub(k.at) >= Every {
		k.layout, k.at = discover(), now
	}
	return k.layout
}

// Forget drops the layout: the next Get discovers afresh.
func (k *Kept[L]) Forget() { k.layout = nil }

// Has tells whether a layout is kept.
func (k *Kept[L]) Has() bool { return k.layout != nil }
