package members

import "time"

// MaxDisruptionForTest sets the disruption bound of a Set built by a test.
func (s *Set) MaxDisruptionForTest(d time.Duration) { s.o.MaxDisruption = d }
