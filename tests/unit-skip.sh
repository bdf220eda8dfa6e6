#!/bin/sh
# Stands in for the criterion unit tests when configure did not find
# criterion: a TAP plan of zero tests, marked skipped.
echo "1..0 # SKIP criterion not installed"
exit 77
