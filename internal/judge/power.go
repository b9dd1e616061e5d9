package judge

// AtPlateau is whether a power draw lies in the ~100 W plateau band
// [PlateauLowWatts, PlateauHighWatts].
func AtPlateau(watts float64) bool { return watts >= PlateauLowWatts && watts <= PlateauHighWatts }

// ThermalSlowdownCounts is whether a share of time spent in thermal
// slowdown (0–1) is enough to count as throttling (ThermalSlowdownShare).
func ThermalSlowdownCounts(share float64) bool { return share > ThermalSlowdownShare }
