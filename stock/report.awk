{ hits[$1][$2]++; bytes[$3][$5] += $4; seen[$1][$3] = $4; total += $4 }
END {
  n = 0
  for (u in hits) { s = 0; for (a in hits[u]) s += hits[u][a]; if (s > 3) n++ }
  for (r in bytes) for (st in bytes[r]) if (bytes[r][st] > 1000000) big++
  m = 0
  for (u in seen) for (r in seen[u]) m += seen[u][r] % 7
  printf "users %d big %d m %d total %d\n", n, big, m, total
}
