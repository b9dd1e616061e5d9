package layout

import "time"

// Every is how long a layout is kept: a driver loaded later shows within it.
const Every = time.Minute

// Kept is a collector's latest layout; the collector's lock guards it.
type Kept[L any] struct {
	layout *L
	at     time.Time
}

func (k *Kept[L]) Get(now time.Time, discover func() *L) *L {
	if k.layout == nil || now.Sub(k.at) >= Every {
		k.layout, k.at = discover(), now
	}
	return k.layout
}

func (k *Kept[L]) Forget() { k.layout = nil }

func (k *Kept[L]) Has() bool { return k.layout != nil }
