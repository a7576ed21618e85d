my $n = shift; my %h; my $s = 0;
for my $r (1..3) {
  for my $i (1..$n) { my $k = "k" . ($i * 7919 % $n); push @{$h{$k}{list}}, { id => $i, name => "n$i", v => [$i, $i*2] }; }
  for my $k (sort keys %h) { for my $e (@{$h{$k}{list}}) { $s += $e->{v}[1] + length($e->{name}); } }
  %h = () if $r < 3;
}
print "$s\n";
